// src/api/errors.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export * from '../errors.ts';
