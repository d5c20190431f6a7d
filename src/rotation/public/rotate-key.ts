// src/rotation/rotate-key.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { rotateKeyUntilStored } from '../rotate-key.ts';
export type { StopAfterStore } from '../rotate-key.ts';
