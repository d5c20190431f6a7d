// One rate limiter shared by every caller of the API in this process. A token bucket keeps the
// steady rate under the plan's limit; a 429 with Retry-After seen by any caller pauses all of
// them, because the API's limit is per credential, not per caller: one caller's 429 means the
// next request from any other caller would be refused too.

export interface RateLimiterOptions {
  /** Requests per minute on average. */
  perMinute: number;
  /** Requests allowed back to back before the steady rate applies; default: half a second's worth. */
  burst?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
}

export class RateLimiter {
  readonly #perMs: number;
  readonly #capacity: number;
  readonly #now: () => number;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  #tokens: number;
  #refilledAt: number;
  #pausedUntil = 0;

  constructor(opts: RateLimiterOptions) {
    if (!Number.isFinite(opts.perMinute) || opts.perMinute <= 0) {
      throw new RangeError('RateLimiter perMinute must be a positive number');
    }
    this.#perMs = opts.perMinute / 60_000;
    // Half a second, not a whole one: a server that allows a one-second burst (a common token
    // bucket) sees our calls after a varying delay, and a client holding the same burst has no
    // margin once both buckets are empty: a call that arrives sooner than the one before it meets
    // 429, whose whole-second Retry-After then stalls every caller. The other half absorbs up to
    // half a second of latency jitter (with a one-second burst, a leak rotation paced at the rate
    // of the emulator's bucket met such a 429 in every trial; see test/emulator/rate-limit.test.ts).
    this.#capacity = Math.max(1, opts.burst ?? Math.floor(opts.perMinute / 120));
    this.#now = opts.now ?? Date.now;
    this.#sleep = opts.sleep ?? defaultSleep;
    this.#tokens = this.#capacity;
    this.#refilledAt = this.#now();
  }

  /** Waits for a free slot (and for any pause to end), then takes it. Rejects when `signal` aborts. */
  async acquire(signal?: AbortSignal): Promise<void> {
    for (;;) {
      signal?.throwIfAborted();
      const now = this.#now();
      if (now < this.#pausedUntil) {
        await abortable(this.#sleep(this.#pausedUntil - now, signal), signal);
        continue;
      }
      this.#refill(now);
      if (this.#tokens >= 1) {
        this.#tokens -= 1;
        return;
      }
      // Waiters re-check after waking: a pause may have started, or another waiter took the token.
      await abortable(this.#sleep(Math.ceil((1 - this.#tokens) / this.#perMs), signal), signal);
    }
  }

  /** Holds every acquire until `ms` from now (a 429's Retry-After). A shorter pause never cuts a longer one. */
  pauseFor(ms: number): void {
    const until = this.#now() + Math.max(0, ms);
    if (until <= this.#pausedUntil) return;
    this.#pausedUntil = until;
    // No burst right after the pause: the budget the API just refused is spent.
    this.#tokens = 0;
    this.#refilledAt = until;
  }

  /** When the current pause ends (epoch ms), or undefined when not paused. */
  pausedUntil(): number | undefined {
    return this.#pausedUntil > this.#now() ? this.#pausedUntil : undefined;
  }

  #refill(now: number): void {
    if (now <= this.#refilledAt) return;
    this.#tokens = Math.min(this.#capacity, this.#tokens + (now - this.#refilledAt) * this.#perMs);
    this.#refilledAt = now;
  }
}

// Clears its timer on abort so an aborted waiter does not keep the process alive.
function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

async function abortable(wait: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (signal === undefined) {
    await wait;
    return;
  }
  signal.throwIfAborted();
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => {
      reject(signal.reason as Error);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    await Promise.race([wait, aborted]);
  } finally {
    if (onAbort !== undefined) signal.removeEventListener('abort', onAbort);
  }
}
