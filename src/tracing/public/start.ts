// src/tracing/start.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { startTracing } from '../start.ts';
