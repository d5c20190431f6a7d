// What the daemon remembers about each key between runs: which keys the last sweep found overdue,
// quarantined or drifted (keyroll_keys_overdue, _quarantined, _drifted: the sweep's reading, kept
// current by the outcomes after it), the last rotation times (a gauge per key), and which keys
// failed recently and are left alone by the sweep for a while. A failure alerted already;
// retrying it on every sweep would page the on-call every few minutes for one broken key.
import type { KeyrollMetrics } from '../metrics/public/metrics.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import type { KeyOutcome, RotationReason } from '../rotation/public/types.ts';
import type { SweepResult } from './sweep.ts';

export class KeyHealth {
  readonly #metrics: KeyrollMetrics;
  readonly #retryFailedAfterMs: number;
  readonly #overdue = new Set<string>();
  /** Quarantined keys, from the last sweep and the outcomes since (keyroll_keys_quarantined). */
  readonly #quarantined = new Set<string>();
  /** Keys whose stored secret is dead and not healed, from the last sweep and the outcomes since (keyroll_keys_drifted). */
  readonly #drifted = new Set<string>();
  /** Key id → epoch ms before which the sweep does not retry the key. */
  readonly #retryAfter = new Map<string, number>();

  constructor(metrics: KeyrollMetrics, retryFailedAfterMs: number) {
    this.#metrics = metrics;
    this.#retryFailedAfterMs = retryFailedAfterMs;
  }

  /** One key's outcome from any run (schedule, sweep or trigger). */
  recordOutcome(outcome: KeyOutcome, reason: RotationReason, nowMs: number, shuttingDown: boolean): void {
    this.#metrics.recordOutcome(outcome, reason);
    if (outcome.quarantinedAt !== undefined) this.#quarantined.add(outcome.keyId);
    else if (outcome.result === 'rotated' || outcome.result === 'recovered')
      this.#quarantined.delete(outcome.keyId);
    this.#metrics.setQuarantined(this.#quarantined.size);
    if (outcome.errorCode === 'KR_DRIFT_DETECTED') this.#drifted.add(outcome.keyId);
    else if (outcome.result === 'rotated' || outcome.result === 'recovered')
      this.#drifted.delete(outcome.keyId);
    this.#metrics.setDrifted(this.#drifted.size);
    if (outcome.result === 'rotated' || outcome.result === 'recovered') {
      this.#retryAfter.delete(outcome.keyId);
      this.#overdue.delete(outcome.keyId);
      this.#metrics.setOverdue(this.#overdue.size);
    } else if ((outcome.result === 'failed' || outcome.result === 'aborted') && !shuttingDown) {
      this.#retryAfter.set(outcome.keyId, nowMs + this.#retryFailedAfterMs);
    }
  }

  /** The state a sweep read: last rotation times and the overdue set are replaced by it. */
  recordSweep(result: SweepResult): void {
    for (const check of result.checks) {
      if (check.lastRotatedAt) this.#metrics.setLastRotation(check.key.id, check.lastRotatedAt);
      this.#metrics.setMaxAge(check.key.id, check.key.maxAgeMs);
    }
    this.#overdue.clear();
    for (const keyId of result.overdue) this.#overdue.add(keyId);
    this.#metrics.setOverdue(this.#overdue.size);
    this.#quarantined.clear();
    for (const keyId of result.quarantined) this.#quarantined.add(keyId);
    this.#metrics.setQuarantined(this.#quarantined.size);
    this.#drifted.clear();
    for (const keyId of result.drifted) this.#drifted.add(keyId);
    this.#metrics.setDrifted(this.#drifted.size);
    // Locks come and go within seconds; only the sweep's reading is reported, never kept current.
    this.#metrics.setLocked(result.locked.length);
  }

  /** False while a recently failed key waits out its back-off (its schedule and triggers still run it). */
  maySweep(keyId: string, nowMs: number): boolean {
    return (this.#retryAfter.get(keyId) ?? 0) <= nowMs;
  }

  /** Forgets keys a reloaded policy no longer has. */
  keepOnly(keys: readonly KeyPolicy[]): void {
    const kept = new Set(keys.map((key) => key.id));
    const known = new Set([
      ...this.#overdue,
      ...this.#retryAfter.keys(),
      ...this.#quarantined,
      ...this.#drifted,
    ]);
    for (const keyId of known) {
      if (kept.has(keyId)) continue;
      this.#overdue.delete(keyId);
      this.#retryAfter.delete(keyId);
      this.#quarantined.delete(keyId);
      this.#drifted.delete(keyId);
    }
    this.#metrics.setOverdue(this.#overdue.size);
    this.#metrics.setQuarantined(this.#quarantined.size);
    this.#metrics.setDrifted(this.#drifted.size);
  }
}
