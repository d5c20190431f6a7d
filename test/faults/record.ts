// The fault suite's case-recording convention and its invariant checkers (issue 6).
// Every fault case runs keyroll against a fault, then asks the same four questions —
// not lost, not leaked, alerted, no double roll — asserts the answers AND records the
// figures on the test, where test/faults/reporter.ts collects them into the table and the
// summary line `N cases, L lost, K leaked, A alerted of F failures`.
import type { TestContext } from 'vitest';

export type FaultCaseResult = 'rotated' | 'failed' | 'recovered' | 'skipped' | 'aborted';

/** One row of the fault table. Counts are per case (a case may hold several runs and keys). */
export interface FaultCase {
  /** Short unique name, e.g. `store × backend down (vault)`. */
  case: string;
  /** The fault injected, e.g. `backend down`, `API 500 after apply`. */
  fault: string;
  /** `file`, `vault`, `aws`, `emulator` (API-only faults), or `cli` for child-process cases. */
  backend: string;
  /** The rotation step the fault hits (preflight … finish), or `run` for whole-run cases. */
  step: string;
  /** What the faulted run reported (before any repair run). */
  result: FaultCaseResult;
  /** Keys whose secret is nowhere usable after the case (and its repair run). Must be 0. */
  lost: number;
  /** Minted secrets found in any captured output. Must be 0. */
  leaked: number;
  /** Failures that produced exactly one alert. Must equal `failures`. */
  alerted: number;
  /** Failed rotations (and aborted runs) in the case. */
  failures: number;
}

declare module 'vitest' {
  interface TaskMeta {
    /** Set by recordCase; read by test/faults/reporter.ts. */
    faultCase?: FaultCase;
  }
}

/** Stores the case's figures on the test for the reporter. Call it before asserting, so a failing case still shows its row. */
export function recordCase(ctx: Pick<TestContext, 'task'>, result: FaultCase): void {
  ctx.task.meta.faultCase = { ...result };
}

// ── not lost ──────────────────────────────────────────────────────────────────────────

/** Every secret found for one key after the case: destination(s), fallbacks, decrypted escrow. */
export interface KeyCopies {
  keyId: string;
  /** undefined for a place that held nothing. */
  secrets: readonly (string | undefined)[];
}

export interface LostCheck {
  /** Keys with no live copy anywhere. */
  lost: number;
  lostKeys: string[];
}

/**
 * Not lost: each key has at least one copy the API accepts (`isLive`, e.g. the emulator's
 * `state.isLiveSecret`). Run it after the repair run when the faulted run left the key unusable.
 */
export function checkNotLost(
  keys: readonly KeyCopies[],
  isLive: (keyId: string, secret: string) => boolean,
): LostCheck {
  const lostKeys = keys
    .filter((key) => !key.secrets.some((secret) => secret !== undefined && isLive(key.keyId, secret)))
    .map((key) => key.keyId);
  return { lost: lostKeys.length, lostKeys };
}

// ── not leaked ────────────────────────────────────────────────────────────────────────
// findSecrets (test/support/secret-scan.ts): the same scan every other test makes of its output.

// ── alerted ───────────────────────────────────────────────────────────────────────────

/** An alert keyroll attempted (delivered or audited undeliverable), reduced to its identity. */
export interface AlertSeen {
  keyId?: string;
  rotationId?: string;
  step: string;
  errorCode: string;
  severity: string;
}

/** What one run reported, as far as alerts go (a RunSummary fits). */
export interface RunReport {
  runId: string;
  outcomes: readonly { keyId: string; result: string; rotationId?: string }[];
  aborted?: { reason: string };
}

export interface AlertCheck {
  /** Failures with exactly one alert. */
  alerted: number;
  /** Failed rotations plus aborted runs. */
  failures: number;
  /** Plain sentences: a failure with no or several alerts, an alert for a success. */
  problems: string[];
}

function alertIdentity(alert: AlertSeen): string {
  return [alert.keyId ?? '', alert.rotationId ?? '', alert.step, alert.errorCode, alert.severity].join(
    '\u0000',
  );
}

/**
 * Alerted: every failed rotation produced exactly one alert, every aborted run one run alert,
 * and a rotated key none — except the warning that a leftover intent was repaired (step
 * `recovery`), which is news about an earlier failure. Repeats of the same alert (sink retries,
 * an alert seen both as a webhook body and an audit event) count once.
 */
export function checkAlerted(runs: readonly RunReport[], alerts: readonly AlertSeen[]): AlertCheck {
  const distinct = [...new Map(alerts.map((alert) => [alertIdentity(alert), alert])).values()];
  const claimed = new Set<AlertSeen>();
  const problems: string[] = [];
  let alerted = 0;
  let failures = 0;
  for (const run of runs) {
    for (const outcome of run.outcomes) {
      // A failure before a rotation id existed (reading the key's state) alerts with the run id.
      const rotationId = outcome.rotationId ?? run.runId;
      const mine = distinct.filter(
        (alert) => alert.keyId === outcome.keyId && alert.rotationId === rotationId,
      );
      for (const alert of mine) claimed.add(alert);
      if (outcome.result === 'failed') {
        failures++;
        if (mine.length === 1) alerted++;
        else problems.push(`key ${outcome.keyId} failed (rotation ${rotationId}) with ${mine.length} alerts`);
      } else {
        const unexpected = mine.filter((alert) => alert.step !== 'recovery');
        if (unexpected.length > 0)
          problems.push(
            `key ${outcome.keyId} ${outcome.result} but alerted at ${unexpected.map((a) => a.step).join(', ')}`,
          );
      }
    }
    if (run.aborted) {
      failures++;
      const mine = distinct.filter(
        (alert) => alert.keyId === undefined && alert.rotationId === run.runId && alert.step === 'run',
      );
      for (const alert of mine) claimed.add(alert);
      if (mine.length === 1) alerted++;
      else problems.push(`run ${run.runId} aborted (${run.aborted.reason}) with ${mine.length} run alerts`);
    }
  }
  for (const alert of distinct) {
    if (!claimed.has(alert))
      problems.push(
        `alert at step ${alert.step} (${alert.errorCode}) for ${alert.keyId ?? 'no key'} matches no outcome`,
      );
  }
  return { alerted, failures, problems };
}

/** The alerts keyroll attempted, from its audit records (`alert.sent` and `alert.undeliverable`). */
export function alertsFromAudit(records: readonly Record<string, unknown>[]): AlertSeen[] {
  const seen: AlertSeen[] = [];
  for (const record of records) {
    if (record.event !== 'alert.sent' && record.event !== 'alert.undeliverable') continue;
    seen.push({
      ...(typeof record.keyId === 'string' ? { keyId: record.keyId } : {}),
      ...(typeof record.rotationId === 'string' ? { rotationId: record.rotationId } : {}),
      step: String(record.alertStep),
      errorCode: String(record.alertErrorCode),
      severity: String(record.severity),
    });
  }
  return seen;
}

// ── no double roll ────────────────────────────────────────────────────────────────────

export interface RollTally {
  keyId: string;
  /** Rolls the API applied during the case (the emulator's rollCount delta). */
  emulatorRolls: number;
  /** Rolls keyroll knows were applied (see reportedRolls). */
  reportedRolls: number;
}

export interface DoubleRollCheck {
  /** Keys whose counts differ. */
  mismatched: number;
  problems: string[];
}

/**
 * Rolls keyroll reports as applied for `keyId` in these audit records (of every run of the case):
 * - one per `key.rolled` (a roll answer received and acted on);
 * - one per roll-step probe that found an earlier, unanswered roll had been applied
 *   (`rolled-and-lost`);
 * - one per crash recovery that found the stored secret dead after a run that never reported a
 *   roll (`key.recovery.started` naming a rotation without `key.rolled`): the dead run rolled and
 *   died before it could say so.
 * A roll keyroll never accounts for — a second runner, a re-roll without cause — makes the
 * emulator's count larger.
 */
export function reportedRolls(records: readonly Record<string, unknown>[], keyId: string): number {
  const mine = records.filter((record) => record.keyId === keyId);
  const reportedRotations = new Set(mine.filter((r) => r.event === 'key.rolled').map((r) => r.rotationId));
  let rolls = mine.filter((r) => r.event === 'key.rolled').length;
  rolls += mine.filter(
    (r) => r.event === 'key.probe' && r.step === 'roll' && r.verdict === 'rolled-and-lost',
  ).length;
  for (const started of mine.filter((r) => r.event === 'key.recovery.started')) {
    if (reportedRotations.has(started.leftRotationId)) continue;
    const foundDead = mine.some(
      (r) =>
        r.event === 'key.probe' &&
        r.step === 'recovery' &&
        r.rotationId === started.rotationId &&
        r.verdict === 'stored-secret-dead',
    );
    if (foundDead) rolls++;
  }
  return rolls;
}

/** No double roll: the API applied exactly the rolls keyroll accounts for. */
export function checkNoDoubleRoll(tallies: readonly RollTally[]): DoubleRollCheck {
  const problems = tallies
    .filter((tally) => tally.emulatorRolls !== tally.reportedRolls)
    .map(
      (tally) =>
        `key ${tally.keyId}: the API applied ${tally.emulatorRolls} roll(s), keyroll reports ${tally.reportedRolls}`,
    );
  return { mismatched: problems.length, problems };
}
