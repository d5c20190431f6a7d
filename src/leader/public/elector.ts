// src/leader/elector.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export * from '../elector.ts';
