// src/policy/load.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { loadPolicy } from '../load.ts';
