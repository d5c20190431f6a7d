// src/rotation/errors.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { RotationStepError } from '../errors.ts';
