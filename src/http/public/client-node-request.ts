// src/http/client-node-request.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { clientNodeRequest } from '../client-node-request.ts';
