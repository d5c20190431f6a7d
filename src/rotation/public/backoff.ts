// src/rotation/backoff.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { backoffDelay, sleep } from '../backoff.ts';
export type { BackoffPolicy } from '../backoff.ts';
