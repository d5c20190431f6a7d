// The emulator's rate limiters with an injected clock: the token bucket that the emergency
// benchmark uses for principal rolls (`rollRateBurstSeconds`), and its place in the pipeline
// next to the fixed minute windows that stay the default.
import { afterEach, describe, expect, it } from 'vitest';
import { RateLimiter } from '../../src/api/rate-limiter.ts';
import { fakeClock } from '../api/mock-api.ts';
import { MinuteWindowLimiter, TokenBucketLimiter, type RateVerdict } from '../../src/emulator/rate-limit.ts';
import { startEmulator } from '../../src/emulator/server.ts';
import { OWNER, TestClock, errorOf, expectError, startTestEmulator, type EmulatorEnv } from './support.ts';

const RATE = 6_000;

/** A token bucket with a 1 s burst on a test clock. */
function bucket(): { clock: TestClock; limiter: TokenBucketLimiter } {
  const clock = new TestClock();
  return { clock, limiter: new TokenBucketLimiter(clock.read, 1) };
}

function takeMany(
  limiter: TokenBucketLimiter,
  count: number,
  bucket = 'principal-rolls',
  perMinute = RATE,
): RateVerdict[] {
  return Array.from({ length: count }, () => limiter.take(bucket, perMinute));
}

function allowedCount(verdicts: readonly RateVerdict[]): number {
  return verdicts.filter((v) => v.allowed).length;
}

describe('TokenBucketLimiter', () => {
  it('allows a burst of burstSeconds of the rate at once (6,000/min, 1 s: 100 calls)', () => {
    const { limiter } = bucket();
    expect(allowedCount(takeMany(limiter, 100))).toBe(100);
  });

  it('refuses the call after the burst with Retry-After of at least one whole second', () => {
    const { limiter } = bucket();
    takeMany(limiter, 100);
    // The next token is 10 ms away; Retry-After is whole seconds and never 0.
    expect(limiter.take('principal-rolls', RATE)).toEqual({ allowed: false, retryAfterSeconds: 1 });
  });

  it('refills continuously at perMinute / 60 per second as the clock moves', () => {
    const { clock, limiter } = bucket();
    takeMany(limiter, 100);
    clock.advance(9);
    expect(limiter.take('principal-rolls', RATE).allowed).toBe(false);
    clock.advance(1);
    expect(takeMany(limiter, 2).map((v) => v.allowed)).toEqual([true, false]);
    clock.advance(250);
    expect(allowedCount(takeMany(limiter, 30))).toBe(25);
  });

  it('refills no further than the burst, however long the bucket was idle', () => {
    const { clock, limiter } = bucket();
    takeMany(limiter, 100);
    clock.advance(3_600_000);
    expect(allowedCount(takeMany(limiter, 150))).toBe(100);
  });

  it('gives a Retry-After after which the call is allowed (rounded up to whole seconds)', () => {
    // 6 per minute: one token every 10 s; a 1 s burst still holds one call.
    const { clock, limiter } = bucket();
    expect(limiter.take('slow', 6).allowed).toBe(true);
    clock.advance(4_500);
    const refused = limiter.take('slow', 6);
    expect(refused).toEqual({ allowed: false, retryAfterSeconds: 6 });
    clock.advance(5_499);
    expect(limiter.take('slow', 6).allowed).toBe(false);
    clock.advance(1);
    expect(limiter.take('slow', 6).allowed).toBe(true);
  });

  it('never allows more than burst + rate × T in any span of T, and keeps up with the rate', () => {
    const { clock, limiter } = bucket();
    const start = clock.now;
    const allowedAt: number[] = [];
    // A greedy client: bursts of 1 to 40 calls at irregular steps of 0 to 19 ms, for two minutes.
    let seed = 7;
    const next = (n: number): number => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648;
      return seed % n;
    };
    while (clock.now - start < 120_000) {
      for (let i = next(40) + 1; i > 0; i--)
        if (limiter.take('principal-rolls', RATE).allowed) allowedAt.push(clock.now);
      clock.advance(next(20));
    }
    const elapsed = clock.now - start;
    expect(allowedAt.length).toBeLessThanOrEqual(100 + (RATE * elapsed) / 60_000);
    // Not stingy either: a client that always asks gets the whole rate.
    expect(allowedAt.length).toBeGreaterThanOrEqual((RATE * elapsed) / 60_000 - 100);
    for (const spanMs of [0, 10, 100, 1_000, 5_000, 60_000]) {
      let worst = 0;
      let last = 0;
      for (let first = 0; first < allowedAt.length; first++) {
        while (last < allowedAt.length && (allowedAt[last] ?? Infinity) <= (allowedAt[first] ?? 0) + spanMs)
          last++;
        worst = Math.max(worst, last - first);
      }
      expect(worst, `span ${String(spanMs)}`).toBeLessThanOrEqual(100 + (RATE * spanMs) / 60_000);
    }
  });

  it('keeps one bucket per name', () => {
    const { limiter } = bucket();
    takeMany(limiter, 100, 'a');
    expect(limiter.take('a', RATE).allowed).toBe(false);
    expect(limiter.take('b', RATE).allowed).toBe(true);
  });

  it('refuses every call at a rate of 0, and refills nothing when the clock steps back', () => {
    const { clock, limiter } = bucket();
    expect(limiter.take('free', 0)).toEqual({ allowed: false, retryAfterSeconds: 60 });
    takeMany(limiter, 100);
    clock.advance(-60_000);
    expect(limiter.take('principal-rolls', RATE).allowed).toBe(false);
    clock.advance(60_010);
    expect(takeMany(limiter, 2).map((v) => v.allowed)).toEqual([true, false]);
  });

  it('rejects a burst that is not a positive number', () => {
    const clock = new TestClock();
    for (const burst of [0, -1, Number.NaN, Number.POSITIVE_INFINITY]) {
      expect(() => new TokenBucketLimiter(clock.read, burst)).toThrow(RangeError);
    }
  });
});

/**
 * Sends `count` calls through keyroll's RateLimiter on a fake clock, delays each by `latencyMs(i)`
 * and lets the emulator's bucket (1 s burst) judge them in arrival order; returns the refusals.
 */
async function refusalsAtArrival(
  count: number,
  latencyMs: (index: number) => number,
  clientBurst?: number,
): Promise<number> {
  const clock = fakeClock(Date.UTC(2030, 0, 1));
  const client = new RateLimiter({
    perMinute: RATE,
    ...(clientBurst === undefined ? {} : { burst: clientBurst }),
    now: clock.now,
    sleep: clock.sleep,
  });
  const arrivals: number[] = [];
  for (let i = 0; i < count; i++) {
    await client.acquire();
    arrivals.push(clock.now() + latencyMs(i));
  }
  arrivals.sort((a, b) => a - b);
  let at = 0;
  const emulator = new TokenBucketLimiter(() => at, 1);
  let refused = 0;
  for (const arrival of arrivals) {
    at = arrival;
    if (!emulator.take('principal-rolls', RATE).allowed) refused++;
  }
  return refused;
}

describe('keyroll paced at the same rate against the token bucket', () => {
  // The first calls open connections and meet a cold server; later ones are quicker. A call that
  // arrives sooner after its predecessor than it was sent is what a bucket with no margin refuses.
  const coldThenWarm = (index: number): number => (index < 100 ? 400 : 5 + (index % 7));

  it('meets no 429 with its default burst, for up to 400 ms of latency jitter', async () => {
    expect(await refusalsAtArrival(1_000, coldThenWarm)).toBe(0);
  });

  it("would meet 429 with a burst as large as the server's: the reason the default is half of it", async () => {
    expect(await refusalsAtArrival(1_000, coldThenWarm, 100)).toBeGreaterThan(0);
  });
});

describe('MinuteWindowLimiter (the default)', () => {
  it('never refuses a burst below the rate: the reason the benchmark needs the token bucket', () => {
    const clock = new TestClock();
    const limiter = new MinuteWindowLimiter(clock.read);
    const verdicts = Array.from({ length: 1_000 }, () => limiter.take('principal-rolls', RATE));
    expect(verdicts.every((v) => v.allowed)).toBe(true);
  });
});

describe('emulator with rollRateBurstSeconds', () => {
  let env: EmulatorEnv | undefined;
  afterEach(async () => {
    await env?.emu.close();
    env = undefined;
  });

  it('answers a principal roll beyond the burst with 429 RATE_LIMITED, Retry-After and no roll, then refills', async () => {
    // 120 per minute with a 1 s burst: two rolls back to back, then one every 500 ms.
    env = await startTestEmulator({ rollRateLimitPerMinute: 120, rollRateBurstSeconds: 1 });
    const { emu, api, clock } = env;
    expect((await api.roll('key_demo_billing', OWNER)).status).toBe(200);
    expect((await api.roll('key_demo_billing', OWNER)).status).toBe(200);
    const refused = await api.roll('key_demo_billing', OWNER);
    expectError(refused, 429, 'RATE_LIMITED');
    expect(refused.headers['retry-after']).toBe('1');
    expect(errorOf(refused).details).toEqual({ limitPerMinute: 120 });
    expect(emu.state.rollCount('key_demo_billing')).toBe(2);
    clock.advance(500);
    expect((await api.roll('key_demo_billing', OWNER)).status).toBe(200);
    expect((await api.roll('key_demo_billing', OWNER)).status).toBe(429);
  });

  it('leaves API-key limits on fixed minute windows', async () => {
    env = await startTestEmulator({
      rollRateBurstSeconds: 1,
      seed: {
        organizations: [{ id: 'org_a', slug: 'a', name: 'A', plan: 'enterprise' }],
        principals: [],
        apiKeys: [{ id: 'key_tiny', name: 'tiny', organizationId: 'org_a', rateLimitPerMinute: 2 }],
      },
    });
    const { emu, api, clock } = env;
    clock.advance(20_000);
    const secret = emu.state.currentSecret('key_tiny');
    expect([
      (await api.list('?limit=1', secret)).status,
      (await api.list('?limit=1', secret)).status,
    ]).toEqual([200, 200]);
    const refused = await api.list('?limit=1', secret);
    expectError(refused, 429, 'RATE_LIMITED');
    expect(refused.headers['retry-after']).toBe('40');
  });

  it('refuses to start with a burst that is not a positive number', async () => {
    await expect(startEmulator({ rollRateBurstSeconds: 0 })).rejects.toThrow(RangeError);
  });
});
