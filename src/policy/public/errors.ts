// src/policy/errors.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { formatIssue } from '../errors.ts';
