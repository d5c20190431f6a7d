// src/alerts/config.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { AlertSinkConfig } from '../config.ts';
