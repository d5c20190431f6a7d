// src/scheduler/generation.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { Generation } from '../generation.ts';
