// src/rotation/failure-streak.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export * from '../failure-streak.ts';
