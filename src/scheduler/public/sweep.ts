// src/scheduler/sweep.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { checkKeys } from '../sweep.ts';
