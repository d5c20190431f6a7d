// src/backends/aws/current-value.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { readCurrentSecretString } from '../../aws/current-value.ts';
