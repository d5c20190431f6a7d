// src/rotation/store-outcome.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { recordFailureBestEffort } from '../store-outcome.ts';
