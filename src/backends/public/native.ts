// src/backends/native.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { AWS_CURRENT, AWS_PENDING, versionWith } from '../native.ts';
export type { NativeRotation, NativeRotationView, RotationRules } from '../native.ts';
