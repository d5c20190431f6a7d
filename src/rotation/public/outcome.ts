// src/rotation/outcome.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { keyOutcome, notStartedFacts } from '../outcome.ts';
