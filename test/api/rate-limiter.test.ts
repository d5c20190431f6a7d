import { describe, expect, it } from 'vitest';
import { RateLimiter } from '../../src/api/rate-limiter.ts';
import { fakeClock } from './mock-api.ts';

describe('RateLimiter', () => {
  it('lets a burst through at once, then spaces requests at the steady rate', async () => {
    const clock = fakeClock();
    const limiter = new RateLimiter({ perMinute: 60, burst: 2, now: clock.now, sleep: clock.sleep });
    await limiter.acquire();
    await limiter.acquire();
    expect(clock.sleeps).toEqual([]);
    await limiter.acquire();
    expect(clock.sleeps).toEqual([1000]);
  });

  it('defaults the burst to half a second of the rate', async () => {
    const clock = fakeClock();
    const limiter = new RateLimiter({ perMinute: 600, now: clock.now, sleep: clock.sleep });
    for (let i = 0; i < 5; i += 1) await limiter.acquire();
    expect(clock.sleeps).toEqual([]);
    await limiter.acquire();
    expect(clock.sleeps).toEqual([100]);
  });

  it('refills with elapsed time, up to the burst', async () => {
    const clock = fakeClock();
    const limiter = new RateLimiter({ perMinute: 60, burst: 2, now: clock.now, sleep: clock.sleep });
    await limiter.acquire();
    await limiter.acquire();
    clock.advance(60_000);
    await limiter.acquire();
    await limiter.acquire();
    expect(clock.sleeps).toEqual([]);
  });

  it('holds every acquire until a pause from a 429 ends', async () => {
    const clock = fakeClock();
    const limiter = new RateLimiter({ perMinute: 6000, now: clock.now, sleep: clock.sleep });
    const start = clock.now();
    limiter.pauseFor(30_000);
    expect(limiter.pausedUntil()).toBe(start + 30_000);
    await limiter.acquire();
    expect(clock.now() - start).toBeGreaterThanOrEqual(30_000);
    expect(clock.sleeps[0]).toBe(30_000);
  });

  it('pauses callers that were already waiting for a token', async () => {
    let t = 0;
    const sleeps: number[] = [];
    const limiter: RateLimiter = new RateLimiter({
      perMinute: 60,
      burst: 1,
      now: () => t,
      sleep: (ms) => {
        sleeps.push(ms);
        // While this caller waits for its token, another caller sees a 429 with Retry-After: 10.
        if (sleeps.length === 1) limiter.pauseFor(10_000);
        t += ms;
        return Promise.resolve();
      },
    });
    await limiter.acquire();
    await limiter.acquire();
    // token wait (1 s), the rest of the pause (9 s), then one token interval after it (1 s)
    expect(sleeps).toEqual([1000, 9000, 1000]);
    expect(t).toBe(11_000);
  });

  it('never lets a shorter pause cut a longer one short', () => {
    const clock = fakeClock();
    const limiter = new RateLimiter({ perMinute: 60, now: clock.now, sleep: clock.sleep });
    limiter.pauseFor(60_000);
    limiter.pauseFor(5_000);
    expect(limiter.pausedUntil()).toBe(clock.now() + 60_000);
  });

  it('reports no pause once it has ended', () => {
    const clock = fakeClock();
    const limiter = new RateLimiter({ perMinute: 60, now: clock.now, sleep: clock.sleep });
    limiter.pauseFor(1_000);
    clock.advance(1_000);
    expect(limiter.pausedUntil()).toBeUndefined();
  });

  it('rejects a waiting acquire when its signal aborts', async () => {
    const limiter = new RateLimiter({
      perMinute: 60,
      now: () => 0,
      sleep: () => new Promise<void>(() => undefined),
    });
    limiter.pauseFor(60_000);
    const controller = new AbortController();
    const waiting = limiter.acquire(controller.signal);
    controller.abort(new Error('shutting down'));
    await expect(waiting).rejects.toThrow('shutting down');
  });

  it('rejects at once when the signal is already aborted', async () => {
    const limiter = new RateLimiter({ perMinute: 60 });
    await expect(limiter.acquire(AbortSignal.abort())).rejects.toThrow();
  });

  it('refuses a rate that is not positive', () => {
    expect(() => new RateLimiter({ perMinute: 0 })).toThrow(RangeError);
  });
});
