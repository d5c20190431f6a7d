// src/crd/policy/refusal.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { refName } from '../../policy/refusal.ts';
export type { Refusal } from '../../policy/refusal.ts';
