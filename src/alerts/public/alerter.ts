// src/alerts/alerter.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { createAlerter } from '../alerter.ts';
export type { AuditedAlerter } from '../alerter.ts';
