// src/scheduler/trigger-keys.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export * from '../trigger-keys.ts';
