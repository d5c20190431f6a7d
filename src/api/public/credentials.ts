// src/api/credentials.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export * from '../credentials.ts';
