// The loop that waits out a server's throttle answers (src/backends/quota/), pausing the quota's
// shared token bucket.
import { describe, expect, it } from 'vitest';
import { retryThrottled, type ThrottleWait } from '../../../src/backends/quota/throttle.ts';
import { fakeClock } from '../../api/mock-api.ts';

class Throttled extends Error {
  readonly retryAfterMs: number | undefined;
  constructor(retryAfterMs?: number) {
    super('Rate exceeded');
    this.retryAfterMs = retryAfterMs;
  }
}
const throttleOf = (error: unknown): { retryAfterMs?: number } | undefined =>
  error instanceof Throttled ? { retryAfterMs: error.retryAfterMs } : undefined;

describe('retryThrottled', () => {
  it('waits out throttle answers with a growing backoff, pauses the shared bucket, and returns the answer', async () => {
    const clock = fakeClock();
    const waits: ThrottleWait[] = [];
    const pauses: number[] = [];
    let calls = 0;
    const result = await retryThrottled(
      () => {
        calls++;
        return calls < 3 ? Promise.reject(new Throttled()) : Promise.resolve('done');
      },
      {
        maxWaitMs: 60_000,
        throttleOf,
        nowMs: clock.now,
        sleep: clock.sleep,
        random: () => 0.5,
        onThrottled: (w) => waits.push(w),
        pause: (ms) => pauses.push(ms),
      },
    );
    expect(result).toBe('done');
    expect(waits).toEqual([
      { attempt: 1, waitMs: 188 },
      { attempt: 2, waitMs: 375 },
    ]);
    expect(pauses).toEqual([188, 375]);
  });

  it("waits the server's Retry-After where it sends one", async () => {
    const clock = fakeClock();
    let first = true;
    await retryThrottled(
      () => {
        if (!first) return Promise.resolve();
        first = false;
        return Promise.reject(new Throttled(3_000));
      },
      { maxWaitMs: 60_000, throttleOf, nowMs: clock.now, sleep: clock.sleep },
    );
    expect(clock.sleeps).toEqual([3_000]);
  });

  it('hands the call the budget it has left, and throws the last throttle answer once the budget is spent', async () => {
    const clock = fakeClock();
    const budgets: number[] = [];
    const error = await retryThrottled(
      (remainingMs) => {
        budgets.push(remainingMs);
        return Promise.reject(new Throttled(4_000));
      },
      { maxWaitMs: 10_000, throttleOf, nowMs: clock.now, sleep: clock.sleep },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Throttled);
    expect(budgets).toEqual([10_000, 6_000, 2_000]);
  });

  it('throws any other error at once', async () => {
    const clock = fakeClock();
    await expect(
      retryThrottled(() => Promise.reject(new Error('denied')), {
        maxWaitMs: 60_000,
        throttleOf,
        nowMs: clock.now,
        sleep: clock.sleep,
      }),
    ).rejects.toThrow('denied');
    expect(clock.sleeps).toEqual([]);
  });
});
