import type { AuditEventName } from './events.ts';

export type AuditLevel = 'error' | 'warn' | 'info' | 'debug';

/**
 * The level of each catalogue event. Failures (and undeliverable alerts) are `error`, so a
 * level filter in the log pipeline never drops them; retries and degradations that keyroll
 * is handling itself are `warn`; the rest is `info`, except what happens by the hundred in a
 * normal emergency (a throttle answer waited out), which is `debug` (KEYROLL_AUDIT_LEVEL=debug). A Record keyed by the catalogue makes a
 * new event without a level fail the type check.
 */
export const AUDIT_EVENT_LEVELS: Record<AuditEventName, AuditLevel> = {
  'run.started': 'info',
  'run.finished': 'info',
  'run.aborted': 'error',
  'run.credential.limited': 'warn',
  'key.skipped': 'info',
  'key.preflight.passed': 'info',
  'key.preflight.failed': 'error',
  'key.lock.acquired': 'info',
  // Not a failure: another runner is rotating the key (invariant 5); worth seeing, not paging.
  'key.lock.busy': 'warn',
  // A runner died holding the lock: its work is repaired now (the intent marker's recovery), worth seeing.
  'key.lock.holder_dead': 'warn',
  'key.lock.released': 'info',
  'key.lock.lost': 'error',
  'key.lock.refresh_failed': 'warn',
  'key.intent.set': 'info',
  'key.intent.cleared': 'info',
  'key.intent.kept': 'warn',
  'key.drift.detected': 'error',
  'key.roll.retry': 'warn',
  'key.rolled': 'info',
  'key.stored': 'info',
  'key.store.retry': 'warn',
  // The secret is safe in a fallback destination; the primary failure is the degradation.
  'key.store.fallback': 'warn',
  // The secret is safe only in the escrow file: consumers cannot read it, so this is a failure.
  'key.escrowed': 'error',
  'key.unusable': 'error',
  'key.verified': 'info',
  'key.verify.failed': 'error',
  'key.succeeded': 'info',
  'key.failed': 'error',
  // A run died mid-rotation earlier; the repair itself is routine.
  'key.recovery.started': 'warn',
  'key.recovered': 'info',
  'key.native.step': 'info',
  'key.native.pending_removed': 'warn',
  'key.probe': 'info',
  // No automatic attempts until a person acts; the key's current secret still works.
  'key.quarantined': 'error',
  'key.failures.cleared': 'info',
  'key.resumed': 'info',
  // keyroll acts safely on its own (absent means attempt and alert now); worth a look, not a page.
  'key.record.distrusted': 'warn',
  'leak.identified': 'info',
  // Nothing to rotate; the responder must look elsewhere (another tool's key, a test value).
  'leak.unmatched': 'warn',
  'leak.proven-dead': 'info',
  // The leak response failed at its one purpose: the value still opens the API.
  'leak.still-alive': 'error',
  // Nobody may assume the leak is closed: a failure until someone checks by hand.
  'leak.unproven': 'error',
  'leak.intake.accepted': 'info',
  'leak.intake.ignored': 'info',
  'leak.intake.coalesced': 'info',
  // Still a live leak, but not a failure: another replica's reconcile takes it within its interval.
  'leak.intake.handed_back': 'warn',
  // A live leak left to a person on purpose: worth seeing at once, not a failure of keyroll.
  'leak.intake.alert_only': 'warn',
  'leak.intake.unidentified': 'warn',
  'leak.intake.resolved': 'info',
  'leak.intake.failed': 'error',
  'leak.reconcile.started': 'info',
  'leak.reconcile.found': 'info',
  'leak.reconcile.skipped': 'debug',
  'leak.reconcile.rate_limited': 'warn',
  'leak.reconcile.finished': 'info',
  'leak.reconcile.failed': 'error',
  // Routine under a busy account: the wait is the design (invariant 11); written only at debug.
  'consumers.started': 'info',
  'consumers.owed': 'warn',
  'consumers.owed-forged': 'warn',
  'consumers.owed-settled': 'info',
  'consumers.finished': 'info',
  'consumer.notified': 'info',
  'consumer.refreshed': 'info',
  // The value is stored; the consumer still holds the old one: a failure a person must see.
  'consumer.failed': 'error',
  'consumer.deferred': 'info',
  'consumer.skipped': 'info',
  'backend.throttled': 'debug',
  'alert.sent': 'info',
  'alert.undeliverable': 'error',
  // The failure itself is audited (key.failed, error); the unsent repeat is bookkeeping.
  'alert.suppressed': 'info',
  'notify.sent': 'info',
  // The rotation itself succeeded; only the courtesy notification was lost.
  'notify.failed': 'warn',
  'policy.reloaded': 'info',
  'policy.reload_failed': 'error',
  // Not a failure: an operator's opt-in, said once so nobody runs on it unknowingly.
  'policy.plain_http': 'warn',
  'trigger.accepted': 'info',
  // The caller's failure (bad signature, replay), not keyroll's; security tooling keys on it.
  'trigger.rejected': 'warn',
  'trigger.rejected_suppressed': 'warn',
  'daemon.started': 'info',
  // Readiness stays 503 and every rotation of the key would fail its own preflight: a failure.
  'daemon.preflight.failed': 'error',
  'daemon.stopping': 'info',
  // A rotation may be cut between two steps; its intent marker makes the next run repair it.
  'daemon.grace_expired': 'error',
  'daemon.stopped': 'info',
  // A replica that stops leading stops starting work: expected at a rollout, a fault otherwise.
  'leader.elected': 'info',
  'leader.lost': 'warn',
  'leader.failed': 'warn',
  // A bug or an environment fault outside any one rotation: visible, and the daemon carries on.
  // The status is written again at the object's next change; a request served is an audit fact.
  'crd.status.failed': 'warn',
  'crd.rotate_now.settled': 'info',
  'crd.watch.synced': 'info',
  // Handled by a relist; worth seeing when it repeats, not paging.
  'crd.watch.resync': 'warn',
  // Retried with backoff; an outage long enough to matter shows as a stream of these.
  'crd.watch.failed': 'warn',
  // A team's object that does nothing until fixed; its status says so too (Ready=False).
  'crd.key_refused': 'warn',
  // Someone's choice, said so that a key nobody rotates any more is never a surprise.
  'crd.key_deleted': 'info',
  'daemon.failed': 'error',
  // Monitoring lost one data point; the rotations themselves are unaffected.
  'metrics.push_failed': 'warn',
};
