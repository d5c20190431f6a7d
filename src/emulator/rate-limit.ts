// The emulator's rate limiters, one state per bucket (an API key, or the emulator-wide roll
// bucket of OAuth/session principals). The clock is injected so tests move time instead of
// waiting for it. Two shapes:
// - MinuteWindowLimiter (the default everywhere): fixed one-minute windows aligned to the
//   clock's minute. Simple and easy to reason about in tests, but a burst smaller than the rate
//   is never refused, so it cannot show a client that outruns the rate within a minute.
// - TokenBucketLimiter (opt-in for principal rolls, `rollRateBurstSeconds`): holds a few
//   seconds of the rate and refills continuously, so a client that fires faster than the rate
//   meets 429 within a second. The emergency benchmark relies on it (bench/emergency.ts).

const WINDOW_MS = 60_000;

export type RateVerdict = { allowed: true } | { allowed: false; retryAfterSeconds: number };

/** What the request pipeline asks of a limiter: may one more call against `bucket` go through at `perMinute`? */
export interface CallLimiter {
  take(bucket: string, perMinute: number): RateVerdict;
}

/** Whole seconds to wait, never 0: "retry after 0" invites a hot loop. */
function retryAfterSeconds(waitMs: number): number {
  return Math.max(1, Math.ceil(waitMs / 1000));
}

export class MinuteWindowLimiter implements CallLimiter {
  readonly #now: () => number;
  readonly #windows = new Map<string, { start: number; count: number }>();

  constructor(now: () => number) {
    this.#now = now;
  }

  /** Counts one call against `bucket`; refuses it when `perMinute` calls were already made this window. */
  take(bucket: string, perMinute: number): RateVerdict {
    const now = this.#now();
    const start = now - (now % WINDOW_MS);
    let window = this.#windows.get(bucket);
    if (window === undefined || window.start !== start) {
      window = { start, count: 0 };
      this.#windows.set(bucket, window);
    }
    if (window.count >= perMinute) {
      return { allowed: false, retryAfterSeconds: retryAfterSeconds(start + WINDOW_MS - now) };
    }
    window.count += 1;
    return { allowed: true };
  }
}

// Levels are kept in units of 1/60,000 token, so one millisecond of refill at `perMinute` adds
// exactly `perMinute` units: integer arithmetic for integer rates on a millisecond clock, with no
// rounding drift over a long run.
const TOKEN = 60_000;

export class TokenBucketLimiter implements CallLimiter {
  readonly #now: () => number;
  readonly #burstSeconds: number;
  readonly #buckets = new Map<string, { level: number; at: number }>();

  /** Each bucket holds `burstSeconds` of its rate (at least one call) and starts full. */
  constructor(now: () => number, burstSeconds: number) {
    if (!Number.isFinite(burstSeconds) || burstSeconds <= 0) {
      throw new RangeError('TokenBucketLimiter burstSeconds must be a positive number');
    }
    this.#now = now;
    this.#burstSeconds = burstSeconds;
  }

  /**
   * Takes one token from `bucket`; refuses the call when less than one is left. Over any span of
   * T ms at most `burst + perMinute × T / 60,000` calls are allowed. A refused call takes nothing.
   */
  take(bucket: string, perMinute: number): RateVerdict {
    // A rate of 0 (a free plan) never refills: the answer is "not this minute".
    if (!(perMinute > 0)) return { allowed: false, retryAfterSeconds: WINDOW_MS / 1000 };
    const now = this.#now();
    const capacity = Math.max(TOKEN, perMinute * this.#burstSeconds * 1000);
    let state = this.#buckets.get(bucket);
    if (state === undefined) {
      state = { level: capacity, at: now };
      this.#buckets.set(bucket, state);
    } else {
      // A clock that steps back refills nothing; it never takes tokens away either. The cap
      // applies even then, for a bucket whose rate was lowered since its last call.
      const elapsed = Math.max(0, now - state.at);
      state.level = Math.min(capacity, state.level + elapsed * perMinute);
      state.at = Math.max(state.at, now);
    }
    if (state.level >= TOKEN) {
      state.level -= TOKEN;
      return { allowed: true };
    }
    return { allowed: false, retryAfterSeconds: retryAfterSeconds((TOKEN - state.level) / perMinute) };
  }
}
