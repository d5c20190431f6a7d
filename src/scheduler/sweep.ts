// The sweep: every check interval the daemon reads each key's state from its primary destination
// and decides, as `run` would, which keys are due. It catches what no cron tick covers: keys
// rotated by age only (maxAge), intent markers left by a crashed runner, and schedule slots
// missed while the daemon was down or the key was busy. It is also where keyroll_keys_overdue,
// _quarantined, _drifted, _locked and the per-key last-rotation and maxAge gauges come from.
import { errorCode, errorMessage } from '../errors.ts';
import { decideDue, type DueDecision } from '../policy/public/due.ts';
import type { KeyState } from '../backends/public/types.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { isQuarantined } from '../rotation/public/failure-streak.ts';
import { mapWithConcurrency } from '../rotation/public/concurrency.ts';
import type { Runtime } from '../rotation/public/runtime.ts';
import { readTrustedState } from '../rotation/public/trusted-state.ts';

export interface KeyCheck {
  key: KeyPolicy;
  /** Absent when the state could not be read. */
  decision?: DueDecision;
  lastRotatedAt?: string;
  /** The last drift probe's time (whatever it found). */
  lastProbeAt?: string;
  /** Why the state could not be read (the key's own run reports it with an alert). */
  readError?: { errorCode: string; message: string };
  /** The key is quarantined after repeated failures (its run skips it until a person acts). */
  quarantined?: boolean;
  /** The last drift probe found the stored secret dead and no rotation was recorded after it. */
  drifted?: boolean;
  /** A runner held the key's lock (unexpired) when the state was read. */
  locked?: boolean;
}

export interface SweepResult {
  checks: KeyCheck[];
  /** Due now, plus keys whose state could not be read: their run fails visibly (invariant 7). */
  due: KeyPolicy[];
  overdue: string[];
  /** Keys quarantined after repeated failures (keyroll_keys_quarantined). */
  quarantined: string[];
  /** Keys whose stored secret is dead and not healed yet (keyroll_keys_drifted). */
  drifted: string[];
  /** Keys locked by a runner when read (keyroll_keys_locked). */
  locked: string[];
}

/** Drift not healed: the last probe said dead, and no rotation was recorded at or after it. */
export function driftUnhealed(state: Pick<KeyState, 'lastProbe' | 'lastRotatedAt'>): boolean {
  if (state.lastProbe?.result !== 'dead') return false;
  return (
    state.lastRotatedAt === undefined || Date.parse(state.lastRotatedAt) < Date.parse(state.lastProbe.at)
  );
}

export async function checkKeys(
  runtime: Runtime,
  keys: readonly KeyPolicy[],
  now: Date,
  concurrency: number,
): Promise<SweepResult> {
  const checks = await mapWithConcurrency(keys, concurrency, async (key): Promise<KeyCheck> => {
    try {
      const { primary } = runtime.resolveKey(key);
      const state = await readTrustedState(primary, key, now);
      const decision = decideDue(
        key,
        {
          ...(state.lastRotatedAt ? { lastRotatedAt: state.lastRotatedAt } : {}),
          ...(state.intent ? { intent: state.intent } : {}),
        },
        now,
      );
      return {
        key,
        decision,
        ...(state.lastRotatedAt ? { lastRotatedAt: state.lastRotatedAt } : {}),
        ...(state.lastProbe ? { lastProbeAt: state.lastProbe.at } : {}),
        ...(isQuarantined(state) ? { quarantined: true } : {}),
        ...(driftUnhealed(state) ? { drifted: true } : {}),
        ...(state.lock !== undefined && Date.parse(state.lock.expiresAt) > now.getTime()
          ? { locked: true }
          : {}),
      };
    } catch (error) {
      return { key, readError: { errorCode: errorCode(error), message: errorMessage(error) } };
    }
  });
  return {
    checks,
    due: checks
      .filter((check) => check.readError !== undefined || check.decision?.due === true)
      .map((check) => check.key),
    overdue: checks.filter((check) => check.decision?.overdue === true).map((check) => check.key.id),
    quarantined: checks.filter((check) => check.quarantined === true).map((check) => check.key.id),
    drifted: checks.filter((check) => check.drifted === true).map((check) => check.key.id),
    locked: checks.filter((check) => check.locked === true).map((check) => check.key.id),
  };
}

/**
 * The keys whose stored secret a runner looked at since `sinceMs`: a probe (whatever it found) or
 * a rotation. A new leader's first drift run leaves them out (its predecessor's last sweep probed
 * them moments ago); its next sweep probes them as usual.
 */
export function checkedSince(checks: readonly KeyCheck[], sinceMs: number): Set<string> {
  const latest = (check: KeyCheck): number =>
    Math.max(
      check.lastProbeAt === undefined ? 0 : Date.parse(check.lastProbeAt),
      check.lastRotatedAt === undefined ? 0 : Date.parse(check.lastRotatedAt),
    );
  return new Set(checks.filter((check) => latest(check) >= sinceMs).map((check) => check.key.id));
}
