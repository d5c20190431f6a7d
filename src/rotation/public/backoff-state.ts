// src/rotation/backoff-state.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export * from '../backoff-state.ts';
