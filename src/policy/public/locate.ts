// src/policy/locate.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { formatPath, positionOf } from '../locate.ts';
