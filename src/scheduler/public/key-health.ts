// src/scheduler/key-health.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { KeyHealth } from '../key-health.ts';
