// Whether a key should rotate now, and why. Pure: the caller passes the clock (`now`) and the
// state read from the primary destination, so `plan`, `run` and the daemon agree, and tests
// need no timers.
import { nextOccurrence } from './cron.ts';
import type { KeyPolicy } from './schema.ts';

export type DueReason = 'never-rotated' | 'schedule' | 'max-age' | 'intent';

export interface DueDecision {
  /** Rotate now: at least one reason, and the minimum interval does not hold it back (an intent always goes ahead). */
  due: boolean;
  reasons: DueReason[];
  /** The next schedule occurrence strictly after `now` (keys with a schedule). */
  nextRunAt?: Date;
  /** lastRotatedAt + minInterval: no scheduled or max-age rotation before this (leak/force rotations bypass it). */
  notBefore?: Date;
  /** lastRotatedAt + maxAge: when the key becomes due by age (keys with a maxAge). */
  maxAgeAt?: Date;
  /** True when there are reasons but `now` is before `notBefore` (invariant 5: no rotation loops). */
  heldByMinInterval: boolean;
  /** Due for more than one schedule period (two or more occurrences missed), or past its maxAge. */
  overdue: boolean;
}

export interface DueState {
  /** ISO-8601 time of the last completed rotation; absent (or unparseable) means never rotated. */
  lastRotatedAt?: string;
  /** An intent marker left by a run that died mid-rotation (invariant 6); any non-null value counts. */
  intent?: unknown;
}

export function decideDue(key: KeyPolicy, state: DueState, now: Date): DueDecision {
  const reasons: DueReason[] = [];
  const hasIntent = state.intent !== undefined && state.intent !== null;
  if (hasIntent) reasons.push('intent');

  const lastMs = state.lastRotatedAt === undefined ? Number.NaN : Date.parse(state.lastRotatedAt);
  const nowMs = now.getTime();
  let overdue = false;
  let notBefore: Date | undefined;
  let maxAgeAt: Date | undefined;

  if (Number.isNaN(lastMs)) {
    // A key keyroll has no record of has never been rotated by it: its age is unknown, so rotate.
    reasons.push('never-rotated');
  } else {
    const last = new Date(lastMs);
    notBefore = new Date(lastMs + key.minIntervalMs);
    if (key.schedule !== undefined) {
      const firstAfterLast = nextOccurrence(key.schedule, key.timezone, last);
      if (firstAfterLast !== undefined && firstAfterLast.getTime() <= nowMs) {
        reasons.push('schedule');
        const secondAfterLast = nextOccurrence(key.schedule, key.timezone, firstAfterLast);
        if (secondAfterLast !== undefined && secondAfterLast.getTime() <= nowMs) overdue = true;
      }
    }
    if (key.maxAgeMs !== undefined) {
      maxAgeAt = new Date(lastMs + key.maxAgeMs);
      if (nowMs >= maxAgeAt.getTime()) {
        reasons.push('max-age');
        overdue = true;
      }
    }
  }

  const held = reasons.length > 0 && !hasIntent && notBefore !== undefined && nowMs < notBefore.getTime();
  const nextRunAt = key.schedule === undefined ? undefined : nextOccurrence(key.schedule, key.timezone, now);
  return {
    due: reasons.length > 0 && !held,
    reasons,
    ...(nextRunAt === undefined ? {} : { nextRunAt }),
    ...(notBefore === undefined ? {} : { notBefore }),
    ...(maxAgeAt === undefined ? {} : { maxAgeAt }),
    heldByMinInterval: held,
    overdue,
  };
}
