// Fixed one-minute windows aligned to the clock's minute, one counter per bucket (an API key,
// or the emulator-wide roll bucket of OAuth/session principals). The clock is injected so tests
// move time instead of waiting for it.

const WINDOW_MS = 60_000;

export type RateVerdict = { allowed: true } | { allowed: false; retryAfterSeconds: number };

export class MinuteWindowLimiter {
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
      // Whole seconds until the window resets, never 0: "retry after 0" invites a hot loop.
      return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((start + WINDOW_MS - now) / 1000)) };
    }
    window.count += 1;
    return { allowed: true };
  }
}
