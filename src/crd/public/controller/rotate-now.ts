// src/crd/controller/rotate-now.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { rotateNowTrigger } from '../../controller/rotate-now.ts';
export type { RotateNowCall, RotateNowPort } from '../../controller/rotate-now.ts';
