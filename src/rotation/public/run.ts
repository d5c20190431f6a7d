// src/rotation/run.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export * from '../run.ts';
