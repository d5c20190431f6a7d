// src/metrics/run-export.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export * from '../run-export.ts';
