// src/scheduler/sweep.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { checkedSince, checkKeys } from '../sweep.ts';
export type { KeyCheck } from '../sweep.ts';
