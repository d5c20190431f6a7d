// The audit event catalogue: every audit line keyroll writes has one of these names
// (documented in docs/audit-events.md). Names are stable: dashboards and SIEM rules key on them.
export const AUDIT_EVENTS = {
  'run.started': 'A run (run, rotate, demo, daemon trigger) began; lists the keys in scope.',
  'run.finished': 'A run ended; counts of rotated, failed, skipped keys and the exit code.',
  'run.aborted': 'A run stopped before finishing (credential refused, shutdown); names the reason.',
  'run.credential.limited':
    "keyroll's credential may not list projects (402/403); the run goes on and each key's roll answer decides.",
  'key.skipped': 'A key was not rotated: not due, minimum interval not reached, or out of shard.',
  'key.preflight.passed': 'Every destination of the key proved writable and the API credential works.',
  'key.preflight.failed': 'A destination or credential check failed; nothing was rolled (invariant 1).',
  'key.lock.acquired': 'The key lock was taken (tookOver=true when a stale lock was taken over).',
  'key.lock.busy': 'Another runner holds the key lock; the key is skipped this run.',
  'key.lock.holder_dead':
    "Another runner's key lock was taken over before its TTL because its holder is proven dead (its pod is gone or its container was replaced; Kubernetes only).",
  'key.lock.released': 'The key lock was released.',
  'key.lock.refresh_failed':
    'A refresh of the key lock could not reach the backend; the lease runs out by itself unless a later refresh succeeds (invariant 9).',
  'key.lock.lost':
    'Another runner took the key lock over while this one held it; this runner stops and writes nothing more (invariant 9).',
  'key.intent.set': 'The intent marker was written before the roll (invariant 6).',
  'key.intent.cleared': 'The intent marker was cleared after a finished or repaired rotation.',
  'key.intent.kept':
    "A leftover intent marker stays although the stored secret works: its runner may still act (lock just taken over, or held until a later time); later runs probe again. A leak's marker whose run stored nothing is kept until this rotation's own marker, held past it, replaces it.",
  'key.roll.retry': 'The roll answer was 429 or the outcome unknown; keyroll waits and tries again.',
  'key.rolled': 'The API minted a new secret; carries its fingerprint, never the secret.',
  'key.stored':
    'The new secret reached a destination durably; destination, version, attempts, exposure window.',
  'key.store.retry': 'A write failed and is being retried with backoff.',
  'key.store.fallback': 'The primary destination stayed down; the secret went to a fallback destination.',
  'key.escrowed':
    "No destination took the secret; it was sealed to the operators' age keys in an escrow file.",
  'key.unusable':
    'The secret could not be stored anywhere; the key is unusable until the next run re-rolls it.',
  'key.verified': 'Read-back digest matched and (unless disabled) the API accepted the new key.',
  'key.verify.failed': 'Read-back or the API check failed after the store.',
  'key.succeeded': 'The rotation finished: intent cleared, last rotation recorded, lock released.',
  'key.failed': 'The rotation failed at a step; carries the step, error code and next action.',
  'key.recovery.started': 'An intent marker was found from a run that died mid-rotation; probing.',
  'key.recovered': 'A leftover intent was repaired (stored secret still works, or the key was re-rolled).',
  'key.probe':
    'The stored secret was probed against the API (after an unknown roll outcome, a crash, or a drift check).',
  'key.drift.detected':
    'The stored secret (or, with slot=standby, the standby of a slot entry) no longer works: the key was rolled outside keyroll. Alerted critical (a standby: error, KR_DRIFT_STANDBY_DEAD); healed by a rotation when onDrift is rotate (a standby: rolled as the standby, never the active slot).',
  'key.quarantined':
    'A key reached failures.quarantineAfter consecutive failures: no automatic attempts until `keyroll resume` or a successful on-demand rotation. Alerted critical once (KR_KEY_QUARANTINED).',
  'key.failures.cleared':
    "A success ended the key's failure streak (and lifted its quarantine); alerted once (KR_KEY_RECOVERED) when the failures had alerted.",
  'key.resumed':
    "`keyroll resume` ended the key's failure streak (quarantine or backoff); carries the actor. The next run attempts the key at once.",
  'key.record.distrusted':
    "A record keyroll read back at the key's primary destination is malformed, dated in the future or forged (corruption, a clock far off, or an edit by someone who may change tags or metadata; forged: an AWS lock release mark that names a held lock or a set intent marker without its release key): keyroll does not act on it as written. Carries the record, the field, the problem and what keyroll did instead (ignored: read as absent, so the key is attempted and alerted now, and a forged release frees no lock; bounded: held to the policy's limit; kept: an intent marker), never a malformed value.",
  'key.native.step':
    "Secrets Manager called keyroll's rotation function (scheduler: aws-native) for a step (createSecret, setSecret, testSecret, finishSecret): what the step did (rolled, found-pending, nothing-to-do, tested, finished, not-rolled) and the version token, never a value.",
  'key.native.pending_removed':
    'A native rotation that cannot finish removed AWSPENDING from its version, so the next rotation is not refused as "previous rotation isn\'t complete" (failed=true: the removal itself failed).',
  'leak.identified':
    'A leaked value (read on stdin, never logged) matched a key: its fingerprint, the key, the destination, current or previous value, and the slot of a two-slot entry.',
  'leak.unmatched':
    'A leaked value matched no key of the policy; its fingerprint and the destinations that could not be read.',
  'leak.proven-dead': 'After the leak rotation the API refused the leaked value (401).',
  'leak.still-alive':
    'After the leak rotation the API still accepted the leaked value. Alerted critical (KR_LEAK_STILL_ALIVE).',
  'leak.unproven':
    'After the leak rotation the API gave no answer that says whether the leaked value is dead (network, 5xx, 429). Alerted (KR_LEAK_UNPROVEN).',
  'leak.intake.accepted':
    'A leak scanner (GitHub, GitGuardian) called the daemon with a verified, new alert; the alert is handled in the background.',
  'leak.intake.ignored':
    'A verified scanner event needs no rotation (another event or action, an alert no longer open, a detector not listed, an alert already handled within the hour); audited once per delivery body per hour.',
  'leak.intake.coalesced':
    'An alert of a leaked value that another alert already started a rotation for (in flight or ended) joined that rotation instead of starting another, and proves the value dead itself.',
  'leak.intake.handed_back':
    "A leak rotation never started because this replica began shutting down (SIGTERM): no proof is made and nothing is alerted (the value was never meant to be dead yet); the alert stays open and unanswered for the reconcile of another replica (or of this one's next start).",
  'leak.intake.alert_only':
    'A scanner reported a leak of a key listed under intake.alertOnly: alerted critical, not rotated.',
  'leak.intake.unidentified':
    'A scanner reported a leak without the value (GitGuardian): alerted critical; a person must supply the value.',
  'leak.intake.resolved': "The scanner's alert was resolved as revoked, naming the rotations.",
  'leak.intake.failed':
    'A step of handling a scanner alert failed (token, fetch, identify, rotate, resolve); alerted; the alert stays open.',
  'leak.reconcile.started':
    "The daemon began listing the open GitHub secret scanning alerts of the policy's secret types itself (at start and every intake.github.reconcileInterval).",
  'leak.reconcile.found':
    'The reconcile found an open alert no webhook delivery had brought within the hour; it is handled as a delivery would be (fetch, identify, rotate, prove dead, resolve).',
  'leak.reconcile.skipped':
    'The reconcile left an open alert alone: a job for it is running, one ran within the hour, or the intake queue is full.',
  'leak.reconcile.rate_limited':
    "The reconcile stopped before spending the GitHub token's reserve for webhook deliveries, or to wait out a rate limit (Retry-After, X-RateLimit-Reset); the next one resumes.",
  'leak.reconcile.finished':
    'A reconcile pass ended: alerts listed, handled and skipped, requests made and how many GitHub answered 304 (free).',
  'leak.reconcile.failed':
    "The reconcile could not list the open alerts (token, permission, GitHub's answer); alerted; webhook deliveries are still handled.",
  'consumers.started':
    "A delivery of new values to their consumers began (after a run's or a sweep's rotations): the keys, rotations and consumers, and whether a value died (restarts at once) or may wait for the restart window.",
  'consumers.owed':
    'A run or sweep found workloads still owed a restart (left by a runner that stopped, or waiting for the restart window, now open) and takes them up.',
  'consumers.owed-forged':
    "An entry of a workload's keyroll.io/restart-owed that keyroll never writes (its key does not list the workload, its store time is in the future, or its rotation is one the key's record does not know) was removed without syncing or restarting anything.",
  'consumers.owed-settled':
    "An entry of a workload's keyroll.io/restart-owed that no longer counts (restarted for already, superseded by a later rotation of its key, or the pods rolled since it was written) was removed without a restart.",
  'consumers.finished': 'A delivery ended: how many consumers were refreshed, failed, deferred or skipped.',
  'consumer.notified':
    'A consumer was told of a new value: an ExternalSecret annotated force-sync, a workload restarted (its pod template restartedAt), a webhook notice delivered.',
  'consumer.refreshed':
    'A consumer holds the new value: an ExternalSecret synced after the store, a restarted rollout complete, a webhook notice delivered. Carries the time from the store.',
  'consumer.failed':
    'A consumer could not be refreshed (not found, forbidden, unreachable, timeout, sync or rollout failed, webhook refused): its error code and what to run by hand. The rotation stays rotated; alerted once per delivery.',
  'consumer.deferred':
    'A restart that can wait (the previous value still works) waits for the restart window: recorded on the workload (keyroll.io/restart-owed) for the first run or sweep inside it.',
  'consumer.skipped':
    'Another runner already restarted the workload for these rotations (keyroll.io/restarted-for): not restarted twice.',
  'backend.throttled':
    'A backend refused a request for its request quota (AWS ThrottlingException, a Vault/OpenBao rate-limit 429); keyroll waits it out and sends it again (debug level: counted in keyroll_backend_throttled_total either way).',
  'alert.sent': 'An alert reached its sink.',
  'alert.undeliverable': 'An alert could not be delivered after retries.',
  'alert.suppressed':
    'A repeat failure of a key in backoff was not alerted: its streak alerted within failures.remindEvery. Carries the step, error code and severity the alert would have had.',
  'notify.sent':
    'A success notification webhook was called (a `webhook` consumer or a `notify.onSuccess` sink).',
  'notify.failed': 'A success notification webhook failed (its `consumer.failed` event and alert follow).',
  'policy.reloaded': 'The daemon loaded a new policy (SIGHUP).',
  'policy.reload_failed': 'A new policy was invalid; the old one stays in force.',
  'policy.plain_http':
    'An endpoint may use plain http:// to another machine (allowInsecureHttp: true in the policy, or --pushgateway-allow-insecure-http): written once when run, rotate or the daemon starts, and by the daemon for one a reloaded policy adds. Names the endpoint and its host, or the reference its URL is read from; never the URL.',
  'trigger.accepted': 'A signed trigger request started rotations.',
  'trigger.rejected': 'A trigger request was refused (bad signature, stale timestamp, replay).',
  'trigger.rejected_suppressed':
    'Trigger refusals past the per-minute audit budget, counted instead of audited one by one.',
  'daemon.started':
    'The daemon is serving and scheduling; names the listen address, the policy file, the schedules and the check interval.',
  'daemon.preflight.failed':
    "A destination failed the daemon's readiness preflight; /readyz answers 503 until it passes.",
  'daemon.stopping':
    'SIGTERM or SIGINT: schedules stopped, new triggers refused, in-flight rotations finishing their store.',
  'daemon.grace_expired':
    'The shutdown grace ended with rotations in flight; the process exits and the next run recovers their intent markers.',
  'daemon.stopped':
    'The daemon stopped; whether in-flight work finished within the grace, and the exit code.',
  'leader.elected':
    'This replica took the Lease: it runs the schedules, sweeps, drift probes, owed restarts and the leak reconcile from now (a sweep and a reconcile start at once).',
  'leader.lost':
    'This replica stopped leading: it could not renew the Lease within the renew deadline, saw another holder, or released it at shutdown. It starts no new schedule, sweep or reconcile work from that moment; rotations already rolled finish their store.',
  'leader.failed':
    'Reading or writing the Lease failed (the API server unreachable, refused, a conflict). A candidate audits the first failure of a streak; a leader every one until it renews or its renew deadline ends its term.',
  'crd.status.failed':
    "The leader could not write a RotatedKey's status, record its Event, serve its rotate-now request or remove the settled annotation; nothing is thrown at the daemon, and the object's next change (or the next leader) writes it again.",
  'crd.rotate_now.settled':
    'A keyroll.io/rotate-now request on a RotatedKey was served: which object and key, the reason, the field manager that set the annotation, and how it ended (status.rotateNow holds the same).',
  'crd.watch.synced':
    'A reflector finished a full list of a watched resource (keyroll.io objects): how many objects, whether it was a relist after 410 Gone, and how many came out added, modified or deleted.',
  'crd.watch.resync':
    'The API server no longer holds the resourceVersion a watch resumed from (410 Gone): the reflector lists the resource again and emits the differences.',
  'crd.watch.failed':
    'A list or watch of a watched resource failed (the API server unreachable, refused, silent) or a change handler threw; the reflector tries again after a jittered, capped backoff, resuming from the last resourceVersion it saw.',
  'crd.key_refused':
    'A keyroll.io object is left out of the policy the daemon builds from the objects (--keys-from kubernetes): its kind, namespace/name, the refusal\'s reason (docs/crds.md, "Tenancy") and message. Written once per version of the object; a relist or another object\'s change does not repeat it.',
  'crd.key_deleted':
    'A RotatedKey whose key was in force was deleted: the daemon no longer rotates the key (a rotation in flight finishes), and the stored secret is left as it is.',
  'daemon.failed':
    'A step of the daemon itself failed (sweep, schedule tick, readiness check, closing a runtime); the daemon keeps running.',
  'metrics.push_failed': "Metrics could not be pushed to the Pushgateway; the run's exit code is unchanged.",
} as const;

export type AuditEventName = keyof typeof AUDIT_EVENTS;

/** Context every event of one rotation carries. */
export interface AuditContext {
  runId?: string;
  rotationId?: string;
  keyId?: string;
  organizationId?: string;
  actor?: string;
  reason?: string;
  ticket?: string;
}

/** The audit trail. Implementations sanitize every field (invariant 3) before writing. */
export interface AuditLog {
  emit(event: AuditEventName, fields?: Record<string, unknown>): void;
  /** An audit log whose events all carry `context` too. */
  child(context: AuditContext): AuditLog;
}
