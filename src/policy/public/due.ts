// src/policy/due.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { decideDue } from '../due.ts';
export type { DueDecision, DueReason } from '../due.ts';
