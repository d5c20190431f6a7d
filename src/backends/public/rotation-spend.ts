// src/backends/rotation-spend.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { rotationSpend } from '../rotation-spend.ts';
export type { RotationRole } from '../rotation-spend.ts';
