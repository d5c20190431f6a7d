// src/lambda/schedule.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export * from '../schedule.ts';
