// src/policy/key-entry.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export * from '../key-entry.ts';
