// src/api/retry-after.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { parseRetryAfter } from '../retry-after.ts';
