// src/crd/policy/objects-to-policy.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { objectsToPolicy } from '../../policy/objects-to-policy.ts';
export type { SharedSettings } from '../../policy/objects-to-policy.ts';
