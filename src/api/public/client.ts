// src/api/client.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { ApiClient, MAX_SHARED_PAUSE_MS } from '../client.ts';
