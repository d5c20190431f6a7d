// src/policy/from-document.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { policyFromDocument, policyWithoutKeys } from '../from-document.ts';
