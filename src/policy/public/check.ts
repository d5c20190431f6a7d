// src/policy/check.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { checkPolicy } from '../check.ts';
