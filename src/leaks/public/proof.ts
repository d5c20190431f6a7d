// src/leaks/proof.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { proveLeakDead } from '../proof.ts';
export type { LeakProof } from '../proof.ts';
