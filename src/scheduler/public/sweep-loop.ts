// src/scheduler/sweep-loop.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { SweepLoop } from '../sweep-loop.ts';
