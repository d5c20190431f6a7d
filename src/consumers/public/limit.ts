// src/consumers/limit.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { Limit } from '../limit.ts';
