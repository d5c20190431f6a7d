// src/backends/aws/client.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { SecretsManagerCalls } from '../../aws/client.ts';
