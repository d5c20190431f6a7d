// A key's failure streak: the failures in a row it is in, and the backoff and quarantine they
// bring. A CronJob every 10 minutes against a destination with a wrong policy would otherwise try
// (and page) six times an hour all night. The streak of consecutive failures is recorded at the
// key's primary destination (FailureRecord), so it survives restarts and every runner sees the
// same one:
// - after failure n the next automatic attempt waits initial·2^(n−1), capped, jittered;
// - after `quarantineAfter` failures the key is quarantined: no automatic attempts until
//   `keyroll resume` or a successful on-demand rotation (leak, force, manual);
// - alerts go out on a change of state (first failure, quarantine, recovery) and as a reminder
//   every `remindEvery`, not on every attempt; a repeat is audited as alert.suppressed.
// A key with an intent marker is never backed off, quarantined or kept quiet: a roll happened and
// its secret may be dead, so it is repaired every run and alerts every time (invariants 6 and 7).
import type { FailureRecord, KeyState } from '../backends/public/types.ts';
import { parseDuration } from '../policy/public/duration.ts';
import type { FailureSettings, KeyPolicy } from '../policy/public/schema.ts';
import { BUILTIN_DEFAULTS } from '../policy/public/settings.ts';

/** What applies to a key built without the policy's resolution (docs/policy.md, `failures`). */
export const DEFAULT_FAILURE_SETTINGS: Readonly<FailureSettings> = Object.freeze({
  backoffInitialMs: parseDuration(BUILTIN_DEFAULTS.failures.backoff.initial),
  backoffCapMs: parseDuration(BUILTIN_DEFAULTS.failures.backoff.cap),
  jitter: BUILTIN_DEFAULTS.failures.backoff.jitter,
  quarantineAfter: BUILTIN_DEFAULTS.failures.quarantineAfter,
  remindEveryMs: parseDuration(BUILTIN_DEFAULTS.failures.remindEvery),
});

export function failureSettingsOf(key: Pick<KeyPolicy, 'failures'>): FailureSettings {
  return key.failures ?? DEFAULT_FAILURE_SETTINGS;
}

/** The streak of consecutive failures a key is in. */
export interface FailureStreak {
  consecutive: number;
  /** ISO-8601 */
  firstAt: string;
  last: FailureRecord;
  nextAttemptAt?: string;
  quarantinedAt?: string;
  lastAlertedAt?: string;
}

/**
 * The streak in force, or undefined when there is none: never failed, or a success or `resume`
 * ended it. A failure older than the last recorded rotation is history, whatever its record says
 * (a success whose clearing write was lost, a rotation by a keyroll that predates streaks). A
 * record without streak fields (older keyrolls) is one failure, which alerted when it happened.
 */
export function activeStreak(
  state: Pick<KeyState, 'lastFailure' | 'lastRotatedAt'>,
): FailureStreak | undefined {
  const last = state.lastFailure;
  if (last === undefined) return undefined;
  if (state.lastRotatedAt !== undefined && !(Date.parse(last.at) > Date.parse(state.lastRotatedAt)))
    return undefined;
  if (last.consecutive === undefined)
    return { consecutive: 1, firstAt: last.at, last, lastAlertedAt: last.at };
  if (last.consecutive <= 0) return undefined;
  return {
    consecutive: last.consecutive,
    firstAt: last.firstAt ?? last.at,
    last,
    ...(last.nextAttemptAt === undefined ? {} : { nextAttemptAt: last.nextAttemptAt }),
    ...(last.quarantinedAt === undefined ? {} : { quarantinedAt: last.quarantinedAt }),
    ...(last.lastAlertedAt === undefined ? {} : { lastAlertedAt: last.lastAlertedAt }),
  };
}

/** True when the key's primary destination records it as quarantined now. */
export function isQuarantined(state: Pick<KeyState, 'lastFailure' | 'lastRotatedAt' | 'intent'>): boolean {
  return state.intent === undefined && activeStreak(state)?.quarantinedAt !== undefined;
}

export type AttemptGate =
  | { kind: 'go' }
  | { kind: 'backoff'; until: string; streak: FailureStreak }
  | { kind: 'quarantined'; since: string; streak: FailureStreak };

/**
 * Whether an automatic attempt (schedule, max age, drift) may run now. On-demand rotations never
 * ask: a person (or a leak scanner) asked for this key, now.
 */
export function automaticAttemptGate(
  state: Pick<KeyState, 'lastFailure' | 'lastRotatedAt' | 'intent'>,
  now: Date,
): AttemptGate {
  // Invariant 6: a marker means a roll happened and the stored secret may be dead: repair now.
  if (state.intent !== undefined) return { kind: 'go' };
  const streak = activeStreak(state);
  if (streak === undefined) return { kind: 'go' };
  if (streak.quarantinedAt !== undefined) return { kind: 'quarantined', since: streak.quarantinedAt, streak };
  if (streak.nextAttemptAt !== undefined && Date.parse(streak.nextAttemptAt) > now.getTime())
    return { kind: 'backoff', until: streak.nextAttemptAt, streak };
  return { kind: 'go' };
}

/** The wait after failure `n` (1-based): initial·2^(n−1), capped, shortened by up to `jitter`. */
export function backoffAfter(
  n: number,
  settings: FailureSettings,
  random: () => number = Math.random,
): number {
  const base = Math.min(
    settings.backoffCapMs,
    settings.backoffInitialMs * 2 ** Math.max(0, Math.min(n - 1, 40)),
  );
  return Math.round(base * (1 - settings.jitter * random()));
}

/** Why an alert about a failure goes out, or why it does not. */
export type FailureAlertKind =
  /** The key was fine before: the change of state an on-call must hear about. */
  | 'first-failure'
  /** This failure reached quarantineAfter: one critical alert, then silence. */
  | 'quarantine'
  /** Still failing, and the last alert is at least remindEvery old. */
  | 'reminder'
  /** An intent marker, or an on-demand rotation: every failure alerts. */
  | 'every-time'
  /** A repeat inside remindEvery: audited (key.failed, alert.suppressed), not sent. */
  | 'suppressed';

export interface FailureVerdict {
  record: FailureRecord;
  alert: FailureAlertKind;
  streak: FailureStreak;
}

export interface FailureFacts {
  rotationId: string;
  step: string;
  errorCode: string;
  /** ISO-8601 */
  at: string;
  /** A roll happened (or may have), or an intent marker was found: repaired every run, never backed off. */
  intentMarked: boolean;
  /** A person or a leak report asked for this rotation: their failure always alerts. */
  onDemand: boolean;
}

/** The record a failure leaves at the primary destination, and whether it alerts. */
export function nextFailure(
  prior: FailureStreak | undefined,
  facts: FailureFacts,
  settings: FailureSettings,
  random: () => number = Math.random,
): FailureVerdict {
  const { rotationId, step, errorCode, at } = facts;
  const atMs = Date.parse(at);
  const consecutive = (prior?.consecutive ?? 0) + 1;
  const firstAt = prior?.firstAt ?? at;
  let alert: FailureAlertKind;
  let quarantinedAt: string | undefined;
  let nextAttemptAt: string | undefined;
  if (facts.intentMarked) {
    // Never quarantined or backed off: the next run repairs it, whatever the count.
    alert = 'every-time';
  } else {
    quarantinedAt = prior?.quarantinedAt ?? (consecutive >= settings.quarantineAfter ? at : undefined);
    if (quarantinedAt === undefined)
      nextAttemptAt = new Date(atMs + backoffAfter(consecutive, settings, random)).toISOString();
    const remindDue =
      prior?.lastAlertedAt === undefined || atMs - Date.parse(prior.lastAlertedAt) >= settings.remindEveryMs;
    if (prior?.quarantinedAt === undefined && quarantinedAt !== undefined) alert = 'quarantine';
    else if (prior === undefined) alert = 'first-failure';
    else if (facts.onDemand) alert = 'every-time';
    else alert = remindDue ? 'reminder' : 'suppressed';
  }
  const lastAlertedAt = alert === 'suppressed' ? prior?.lastAlertedAt : at;
  const record: FailureRecord = {
    rotationId,
    step,
    errorCode,
    at,
    consecutive,
    firstAt,
    ...(nextAttemptAt === undefined ? {} : { nextAttemptAt }),
    ...(quarantinedAt === undefined ? {} : { quarantinedAt }),
    ...(lastAlertedAt === undefined ? {} : { lastAlertedAt }),
  };
  const streak: FailureStreak = {
    consecutive,
    firstAt,
    last: record,
    ...(nextAttemptAt ? { nextAttemptAt } : {}),
    ...(quarantinedAt ? { quarantinedAt } : {}),
    ...(lastAlertedAt ? { lastAlertedAt } : {}),
  };
  return { record, alert, streak };
}

/** The record that ends a streak (a success, or `keyroll resume`): the last failure stays as history. */
export function endedStreak(streak: FailureStreak): FailureRecord {
  const { rotationId, step, errorCode, at } = streak.last;
  return {
    rotationId,
    step,
    errorCode,
    at,
    consecutive: 0,
    firstAt: streak.firstAt,
    ...(streak.lastAlertedAt ? { lastAlertedAt: streak.lastAlertedAt } : {}),
  };
}

/** A reminder about a quarantined key (no attempts run) is due when the last alert is this old. */
export function quarantineReminderDue(streak: FailureStreak, settings: FailureSettings, now: Date): boolean {
  return (
    streak.lastAlertedAt === undefined ||
    now.getTime() - Date.parse(streak.lastAlertedAt) >= settings.remindEveryMs
  );
}

/** One sentence for alerts and `status`: how long the key has failed and what happens next. */
export function describeStreak(streak: FailureStreak): string {
  const since = `${streak.consecutive} consecutive failure${streak.consecutive === 1 ? '' : 's'} since ${streak.firstAt}`;
  if (streak.quarantinedAt !== undefined) return `${since}; quarantined since ${streak.quarantinedAt}`;
  if (streak.nextAttemptAt !== undefined)
    return `${since}; next automatic attempt not before ${streak.nextAttemptAt}`;
  return since;
}

/** The streak as `status` and `plan` show it (their `-o json` field `failureStreak`). */
export interface StreakView {
  consecutive: number;
  firstAt: string;
  lastAt: string;
  lastStep: string;
  lastErrorCode: string;
  /** No automatic attempt before this time (null: quarantined, or no backoff recorded). */
  nextAttemptAt: string | null;
  /** Quarantined since then (null: not quarantined). */
  quarantinedAt: string | null;
  /** An intent marker overrides the streak: the key is repaired every run regardless. */
  intentMarked: boolean;
}

export function streakView(
  state: Pick<KeyState, 'lastFailure' | 'lastRotatedAt' | 'intent'>,
): StreakView | null {
  const streak = activeStreak(state);
  if (streak === undefined) return null;
  return {
    consecutive: streak.consecutive,
    firstAt: streak.firstAt,
    lastAt: streak.last.at,
    lastStep: streak.last.step,
    lastErrorCode: streak.last.errorCode,
    nextAttemptAt: streak.nextAttemptAt ?? null,
    quarantinedAt: state.intent === undefined ? (streak.quarantinedAt ?? null) : null,
    intentMarked: state.intent !== undefined,
  };
}

/** One table cell: why the key is held back and since when, or undefined when it is not. */
export function streakCell(view: StreakView | null, now: Date): string | undefined {
  if (view === null || view.intentMarked) return undefined;
  const failures = `${String(view.consecutive)} failure${view.consecutive === 1 ? '' : 's'} since ${view.firstAt}, last ${view.lastStep} ${view.lastErrorCode}`;
  if (view.quarantinedAt !== null)
    return `QUARANTINED since ${view.quarantinedAt} (${failures}; keyroll resume)`;
  if (view.nextAttemptAt !== null && Date.parse(view.nextAttemptAt) > now.getTime())
    return `backoff until ${view.nextAttemptAt} (${failures})`;
  return undefined;
}
