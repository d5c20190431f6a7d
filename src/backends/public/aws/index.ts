// src/backends/aws/index.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { awsAccessFromEnv } from '../../aws/index.ts';
