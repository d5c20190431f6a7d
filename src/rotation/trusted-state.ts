// What keyroll believes of a key's bookkeeping. Every reader of a key's state (run, the rotation
// under its lock, the quarantine reminder, `resume`, the daemon's sweep, `status` and `plan`)
// goes through trustState: each field is parsed with the record schemas (src/backends/schema.ts)
// and its times are checked against the clock and the policy. Tag and metadata permissions are
// granted apart from writing the secret, so without this whoever may only tag a secret could stop
// its rotation in silence: a quarantine with a time of "x", a last alert dated next year (no
// reminder ever), a backoff until 2099, a last rotation in the future (never due).
// The rule: what keyroll cannot trust counts as absent, and absent always means "attempt now, alert
// now" (invariant 7), never "stay quiet". The one exception is the intent marker: a damaged marker
// still means a roll may have happened (invariant 6), so it is kept and repaired like any other.
import type { AuditLog } from '../audit/public/events.ts';
import {
  FailureCoreFields,
  FailureStreakTimes,
  IntentFields,
  IsoInstant,
  LockInfo,
  ProbeRecord,
  RotationFields,
  badFields,
} from '../backends/public/schema.ts';
import type {
  FailureRecord,
  Intent,
  KeyState,
  Records,
  RecordDoubt,
  StoreTarget,
} from '../backends/public/types.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { failureSettingsOf } from './failure-streak.ts';

const STREAK_TIMES = Object.keys(FailureStreakTimes) as (keyof typeof FailureStreakTimes)[];

/** A key's state with every record it does not trust left out or bounded; `doubts` lists them. */
export function trustState(
  state: KeyState,
  key: Pick<KeyPolicy, 'clockSkewMs' | 'failures'>,
  now: Date,
): KeyState {
  const doubts: RecordDoubt[] = [...(state.doubts ?? [])];
  // A record dated after this is in the future by every clock the policy allows (clockSkew).
  const latest = now.getTime() + key.clockSkewMs;
  const future = (time: string): boolean => Date.parse(time) > latest;
  const trusted: KeyState = { exists: state.exists };

  for (const field of ['lastRotatedAt', 'lastRotationId', 'lastKeyId'] as const) {
    const value = state[field];
    if (value === undefined) continue;
    if (!RotationFields[field].safeParse(value).success)
      doubts.push({ record: field, problem: 'malformed', action: 'ignored' });
    else if (field === 'lastRotatedAt' && future(value))
      doubts.push({ record: field, problem: 'future', action: 'ignored', value: iso(value) });
    else trusted[field] = value;
  }

  if (state.lastProbe !== undefined) {
    if (!ProbeRecord.safeParse(state.lastProbe).success)
      doubts.push({ record: 'lastProbe', problem: 'malformed', action: 'ignored' });
    // A probe dated ahead would put off the next drift check by as much.
    else if (future(state.lastProbe.at))
      doubts.push({
        record: 'lastProbe',
        field: 'at',
        problem: 'future',
        action: 'ignored',
        value: iso(state.lastProbe.at),
      });
    else trusted.lastProbe = { at: state.lastProbe.at, result: state.lastProbe.result };
  }

  if (state.lock !== undefined) {
    // Shown by `status` only; each backend's lock code judges the lock it acquires on its own.
    if (LockInfo.safeParse(state.lock).success)
      trusted.lock = {
        owner: state.lock.owner,
        rotationId: state.lock.rotationId,
        expiresAt: state.lock.expiresAt,
      };
    else doubts.push({ record: 'lock', problem: 'malformed', action: 'ignored' });
  }

  if (state.intent !== undefined) trusted.intent = trustIntent(state.intent, doubts);
  if (state.lastFailure !== undefined) {
    const failure = trustFailure(state.lastFailure, key, latest, doubts);
    if (failure !== undefined) trusted.lastFailure = failure;
  }
  if (doubts.length > 0) trusted.doubts = doubts;
  return trusted;
}

/**
 * Invariant 6: a marker is kept whatever is wrong with it, so the key is probed and repaired. Only
 * a holdUntil that is not a time is dropped (nobody could wait for it): the marker is then
 * cleared like any other once the stored secret is proven to work. So is a reason that is not a
 * leak's (the marker is then recovered as one that answers no leak), and a stored fingerprint that
 * is not one (the marker then names no value recovery could re-roll as the leaked one).
 */
const IGNORED_IF_MALFORMED: ReadonlySet<string> = new Set(['holdUntil', 'reason', 'storedFingerprint']);

function trustIntent(intent: Intent, doubts: RecordDoubt[]): Intent {
  const bad = badFields(IntentFields, intent);
  for (const field of bad)
    doubts.push({
      record: 'intent',
      field,
      problem: 'malformed',
      action: IGNORED_IF_MALFORMED.has(field) ? 'ignored' : 'kept',
    });
  const { rotationId, keyId, owner, startedAt, holdUntil, reason, storedFingerprint } = intent;
  const leak = reason === undefined || bad.includes('reason') ? undefined : reason;
  return {
    rotationId,
    keyId,
    owner,
    startedAt,
    ...(holdUntil === undefined || bad.includes('holdUntil') ? {} : { holdUntil }),
    ...(leak === undefined ? {} : { reason: leak }),
    ...(leak === undefined || storedFingerprint === undefined || bad.includes('storedFingerprint')
      ? {}
      : { storedFingerprint }),
  };
}

/**
 * The failure record, or undefined when it cannot be trusted at all. Without its core (what failed,
 * when, how often) it is ignored whole: no streak, so the key is attempted now and its next failure
 * alerts as a first one. A bad streak time is left out alone: no quarantine without a time (a
 * quarantine always has a reason and a time `status` shows), no backoff without an end, and a
 * nextAttemptAt past the policy's backoff cap is held to it. A record with any doubt cannot prove
 * it alerted either: its lastAlertedAt is dropped, so the reminder is due at once.
 */
function trustFailure(
  failure: FailureRecord,
  key: Pick<KeyPolicy, 'clockSkewMs' | 'failures'>,
  latest: number,
  doubts: RecordDoubt[],
): FailureRecord | undefined {
  const core = badFields(FailureCoreFields, failure);
  if (core.length > 0) {
    for (const field of core)
      doubts.push({ record: 'lastFailure', field, problem: 'malformed', action: 'ignored' });
    return undefined;
  }
  if (Date.parse(failure.at) > latest) {
    doubts.push({
      record: 'lastFailure',
      field: 'at',
      problem: 'future',
      action: 'ignored',
      value: iso(failure.at),
    });
    return undefined;
  }
  const { rotationId, step, errorCode, at, consecutive } = failure;
  const trusted: FailureRecord = {
    rotationId,
    step,
    errorCode,
    at,
    ...(consecutive === undefined ? {} : { consecutive }),
  };
  // A backoff never outlasts the policy's cap after the failure that set it.
  const longestWait = Date.parse(at) + failureSettingsOf(key).backoffCapMs;
  const before = doubts.length;
  const doubt = (
    field: string,
    problem: RecordDoubt['problem'],
    action: RecordDoubt['action'],
    value?: string,
  ): void => {
    doubts.push({
      record: 'lastFailure',
      field,
      problem,
      action,
      ...(value === undefined ? {} : { value: iso(value) }),
    });
  };
  for (const field of STREAK_TIMES) {
    const value = failure[field];
    if (value === undefined) continue;
    if (!IsoInstant.safeParse(value).success) doubt(field, 'malformed', 'ignored');
    else if (field !== 'nextAttemptAt' && Date.parse(value) > latest)
      doubt(field, 'future', 'ignored', value);
    else if (field === 'nextAttemptAt' && Date.parse(value) > longestWait + key.clockSkewMs) {
      doubt(field, 'beyond-policy', 'bounded', value);
      trusted.nextAttemptAt = new Date(longestWait).toISOString();
    } else trusted[field] = value;
  }
  if (doubts.length > before) delete trusted.lastAlertedAt;
  return trusted;
}

function iso(time: string): string {
  return new Date(Date.parse(time)).toISOString();
}

/** The key's state at `destination`, as far as keyroll trusts it (trustState). */
export async function readTrustedState(
  destination: { backend: Records; target: StoreTarget },
  key: Pick<KeyPolicy, 'clockSkewMs' | 'failures'>,
  now: Date,
): Promise<KeyState> {
  return trustState(await destination.backend.readState(destination.target), key, now);
}

/**
 * Audits each doubt of `state` (key.record.distrusted) that `known` did not already have, so a run
 * that read the state before the lock and again under it reports each doubt once.
 */
export function auditDoubts(
  audit: AuditLog,
  state: KeyState,
  fields: Record<string, unknown>,
  known?: KeyState,
): void {
  const seen = new Set((known?.doubts ?? []).map(doubtKey));
  for (const doubt of state.doubts ?? []) {
    if (seen.has(doubtKey(doubt))) continue;
    audit.emit('key.record.distrusted', { ...fields, ...doubt });
  }
}

function doubtKey(doubt: RecordDoubt): string {
  return `${doubt.record}/${doubt.field ?? ''}/${doubt.problem}/${doubt.value ?? ''}`;
}
