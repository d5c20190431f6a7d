// src/api/schema.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { API_ERROR_CODES } from '../schema.ts';
