// src/rotation/concurrency.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { mapWithConcurrency } from '../concurrency.ts';
