// src/backends/config.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { BackendConfig } from '../config.ts';
