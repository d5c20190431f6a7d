// src/leaks/github/reconcile.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { reconcileOpenAlerts } from '../../github/reconcile.ts';
export type { ReconcileOutcome } from '../../github/reconcile.ts';
