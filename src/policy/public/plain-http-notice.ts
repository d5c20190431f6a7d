// src/policy/plain-http-notice.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { announcePlainHttp } from '../plain-http-notice.ts';
