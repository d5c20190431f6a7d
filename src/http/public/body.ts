// src/http/body.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { readBodyPrefix } from '../body.ts';
