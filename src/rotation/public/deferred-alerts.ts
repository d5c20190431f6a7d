// src/rotation/deferred-alerts.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { deferAlerts } from '../deferred-alerts.ts';
export type { DeferredAlerts } from '../deferred-alerts.ts';
