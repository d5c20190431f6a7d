// src/leader/holder-liveness.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { HolderLiveness, kubePodReader } from '../holder-liveness.ts';
