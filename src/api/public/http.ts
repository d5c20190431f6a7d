// src/api/http.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { discardBody, headerValue } from '../http.ts';
