// src/policy/endpoints.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export type { PlainHttpEndpoint } from '../endpoints.ts';
