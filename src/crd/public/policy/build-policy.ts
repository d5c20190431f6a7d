// src/crd/policy/build-policy.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { buildPolicyFromObjects } from '../../policy/build-policy.ts';
export type { BuiltPolicy, HeldObjects } from '../../policy/build-policy.ts';
