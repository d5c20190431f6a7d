// src/scheduler/readiness.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { preflightDestinations, readinessAnswer } from '../readiness.ts';
export type { CheckedReadiness, Readiness } from '../readiness.ts';
