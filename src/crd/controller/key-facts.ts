// What keyroll knows of one key, in the form the RotatedKey status tells it (issue 31). Each fact
// comes from where keyroll keeps it, never from the object: the last rotation record, the intent
// marker, the failure streak (with its quarantine) and the last drift probe are the key's
// bookkeeping at its primary destination (KeyState, read through readTrustedState as the sweep,
// `plan` and `status` read it); the next due time is the policy's due rule (decideDue) applied to
// that record; the active slot is invariant 10's rule (activeSlot); the consumers' state comes
// from the refresher's outcomes. Pure: no I/O, the caller gives the clock.
import type { KeyState } from '../../backends/public/types.ts';
import { decideDue } from '../../policy/public/due.ts';
import type { KeyPolicy } from '../../policy/public/schema.ts';
import { activeStreak, isQuarantined } from '../../rotation/public/failure-streak.ts';
import { activeSlot } from '../../rotation/public/slots.ts';
import type { KeyOutcome } from '../../rotation/public/types.ts';

/**
 * The consumers of a key as the status shows them: `pending` from the rotation that owes them the
 * new value until the refresher reports; `unknown` when nothing was reported since keyroll started.
 */
export type ConsumersState = 'unknown' | 'pending' | 'refreshed' | 'not-needed' | 'deferred' | 'failed';

export interface ConsumersFact {
  /** How many consumers the key lists. */
  count: number;
  state: ConsumersState;
  /** Failed or deferred ones: how many. */
  affected?: number;
}

export interface KeyFacts {
  keyId: string;
  /** Set when the key's record could not be read: the status says so instead of guessing. */
  readError?: { errorCode: string };
  lastRotatedAt?: string;
  lastRotationId?: string;
  /** When the key is next due (schedule, maxAge, held by minInterval or a failure's backoff). */
  nextRotation?: string;
  /** A rotation began (intent marker) and its end is not recorded: it runs, or died and awaits repair. */
  intent?: { rotationId: string; startedAt: string };
  /** Since when the key is quarantined (no automatic attempts until a person acts). */
  quarantinedAt?: string;
  /** The last drift probe found the stored secret dead, and no rotation healed it since. */
  driftedAt?: string;
  /** The failure streak's backoff: no automatic attempt before this time. */
  nextAttemptAt?: string;
  /** Consecutive failed rotations (the failure streak); 0 after a success. */
  failedAttempts: number;
  lastFailure?: { errorCode: string; step: string; at: string };
  /** The API key id consumers read now: a two-slot entry's active slot, or the key itself. */
  activeSlot?: string;
  /** Absent when the key lists no consumers. */
  consumers?: ConsumersFact;
}

/** RFC 3339 in whole seconds, as metav1.Time is written: a record's milliseconds would only add noise. */
export function statusTime(iso: string): string | undefined {
  const ms = Date.parse(iso);
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * When the key is next due after its last rotation: the earlier of its first schedule occurrence
 * after that rotation and its maxAge, not before its minInterval; a failure streak's backoff
 * replaces it; none while quarantined or never rotated (due now). Computed from the record, never
 * from the clock, so the same record gives the same time and the status is not rewritten as time
 * passes.
 */
export function nextRotationOf(
  key: KeyPolicy,
  lastRotatedAt: string | undefined,
  failure: { nextAttemptAt?: string | undefined; quarantined: boolean },
): string | undefined {
  if (failure.quarantined) return undefined;
  if (failure.nextAttemptAt !== undefined) return statusTime(failure.nextAttemptAt);
  if (lastRotatedAt === undefined || Number.isNaN(Date.parse(lastRotatedAt))) return undefined;
  const last = new Date(lastRotatedAt);
  const decision = decideDue(key, { lastRotatedAt }, last);
  const candidates = [decision.nextRunAt, decision.maxAgeAt].filter((d): d is Date => d !== undefined);
  const due = candidates.sort((a, b) => a.getTime() - b.getTime())[0];
  if (due === undefined) return undefined;
  const held = decision.notBefore !== undefined && decision.notBefore > due ? decision.notBefore : due;
  return statusTime(held.toISOString());
}

/** Drift not healed (the sweep's rule, src/scheduler/sweep.ts driftUnhealed): dead, and no rotation since. */
function driftedAt(state: Pick<KeyState, 'lastProbe' | 'lastRotatedAt'>): string | undefined {
  const probe = state.lastProbe;
  if (probe?.result !== 'dead') return undefined;
  const healed = state.lastRotatedAt !== undefined && Date.parse(state.lastRotatedAt) >= Date.parse(probe.at);
  return healed ? undefined : probe.at;
}

function consumersOf(key: KeyPolicy, state: ConsumersState): ConsumersFact | undefined {
  const count = key.consumers?.length ?? 0;
  return count === 0 ? undefined : { count, state };
}

/** The facts of a key from its record as read at its primary destination. */
export function factsFromState(key: KeyPolicy, state: KeyState): KeyFacts {
  const streak = activeStreak(state);
  const quarantined = isQuarantined(state);
  const drifted = driftedAt(state);
  const next = nextRotationOf(key, state.lastRotatedAt, {
    nextAttemptAt: streak?.nextAttemptAt,
    quarantined,
  });
  const consumers = consumersOf(key, 'unknown');
  return {
    keyId: key.id,
    ...(state.lastRotatedAt === undefined ? {} : { lastRotatedAt: state.lastRotatedAt }),
    ...(state.lastRotationId === undefined ? {} : { lastRotationId: state.lastRotationId }),
    ...(next === undefined ? {} : { nextRotation: next }),
    ...(state.intent === undefined
      ? {}
      : { intent: { rotationId: state.intent.rotationId, startedAt: state.intent.startedAt } }),
    ...(quarantined && streak?.quarantinedAt !== undefined ? { quarantinedAt: streak.quarantinedAt } : {}),
    ...(drifted === undefined ? {} : { driftedAt: drifted }),
    failedAttempts: streak?.consecutive ?? 0,
    ...(streak?.nextAttemptAt === undefined ? {} : { nextAttemptAt: streak.nextAttemptAt }),
    ...(streak === undefined
      ? {}
      : { lastFailure: { errorCode: streak.last.errorCode, step: streak.last.step, at: streak.last.at } }),
    // A single key's "slot" is the key itself: the SLOT column then names what consumers read.
    activeSlot: key.slots === undefined ? key.id : activeSlot(key.slots, state),
    ...(consumers === undefined ? {} : { consumers }),
  };
}

/**
 * The facts after one outcome, without reading the record again: a rotation (or a repair that
 * stored a new value) ends any streak, quarantine, drift and intent and moves the times; a failure
 * adds to the streak (the record's own count is read again by the reporter when it can); a drift
 * probe that found the secret dead marks drift. Skips, busy locks and aborted runs change nothing.
 */
export function factsAfterOutcome(key: KeyPolicy, facts: KeyFacts, outcome: KeyOutcome, now: Date): KeyFacts {
  if (outcome.result === 'rotated' || outcome.result === 'recovered') {
    const rotatedAt = outcome.rotatedAt ?? facts.lastRotatedAt;
    const next = nextRotationOf(key, rotatedAt, { quarantined: false });
    // What a stored value leaves as it was: the key, its slot (unless this one moved it), its consumers.
    const kept: KeyFacts = {
      keyId: facts.keyId,
      failedAttempts: 0,
      ...(facts.lastRotationId === undefined ? {} : { lastRotationId: facts.lastRotationId }),
      ...(facts.activeSlot === undefined ? {} : { activeSlot: facts.activeSlot }),
      ...(facts.consumers === undefined ? {} : { consumers: facts.consumers }),
    };
    const stored = outcome.rotatedAt !== undefined;
    return {
      ...kept,
      ...(rotatedAt === undefined ? {} : { lastRotatedAt: rotatedAt }),
      ...(stored && outcome.rotationId !== undefined ? { lastRotationId: outcome.rotationId } : {}),
      ...(next === undefined ? {} : { nextRotation: next }),
      failedAttempts: 0,
      ...(stored && key.slots !== undefined && outcome.rolledKeyId !== undefined
        ? { activeSlot: outcome.rolledKeyId }
        : {}),
      ...(stored && facts.consumers !== undefined
        ? { consumers: { count: facts.consumers.count, state: 'pending' as const } }
        : {}),
    };
  }
  if (outcome.result === 'failed' && outcome.errorCode === 'KR_DRIFT_DETECTED')
    return { ...facts, driftedAt: now.toISOString() };
  if (outcome.result === 'failed')
    return {
      ...facts,
      failedAttempts: facts.failedAttempts + 1,
      lastFailure: { errorCode: outcome.errorCode, step: outcome.step, at: now.toISOString() },
      ...(outcome.quarantinedAt === undefined ? {} : { quarantinedAt: outcome.quarantinedAt }),
    };
  if (outcome.result === 'skipped' && outcome.detail === 'quarantined' && outcome.quarantinedAt !== undefined)
    return { ...facts, quarantinedAt: outcome.quarantinedAt };
  return facts;
}

/** The facts once the refresher reported on the consumers of the key's last rotation. */
export function factsAfterConsumers(facts: KeyFacts, report: ConsumersReport): KeyFacts {
  if (facts.consumers === undefined) return facts;
  const { count } = facts.consumers;
  if (report.failed > 0) return { ...facts, consumers: { count, state: 'failed', affected: report.failed } };
  if (report.deferred > 0)
    return { ...facts, consumers: { count, state: 'deferred', affected: report.deferred } };
  if (report.refreshed > 0) return { ...facts, consumers: { count, state: 'refreshed' } };
  return { ...facts, consumers: { count, state: 'not-needed' } };
}

/** One delivery's counts for one key (the refresher's DeliveryReport, narrowed to the key). */
export interface ConsumersReport {
  refreshed: number;
  failed: number;
  deferred: number;
  /** Not refreshed because this rotation did not need it (a slot entry's standby roll). */
  skipped: number;
}

/**
 * The facts under the key's entry as the current generation has it: what the policy decides (the
 * next due time, how many consumers) follows a changed spec without reading the record again.
 */
export function factsUnderPolicy(key: KeyPolicy, facts: KeyFacts): KeyFacts {
  if (facts.readError !== undefined) return facts;
  const next = nextRotationOf(key, facts.lastRotatedAt, {
    nextAttemptAt: facts.nextAttemptAt,
    quarantined: facts.quarantinedAt !== undefined,
  });
  const count = key.consumers?.length ?? 0;
  const { nextRotation: _previous, consumers, ...rest } = facts;
  return {
    ...rest,
    ...(next === undefined ? {} : { nextRotation: next }),
    ...(count === 0 ? {} : { consumers: { ...(consumers ?? { state: 'unknown' as const }), count } }),
  };
}
