// The token bucket every caller of one backend request quota waits in (src/backends/quota/).
import { describe, expect, it } from 'vitest';
import { TokenBucket } from '../../../src/backends/quota/token-bucket.ts';
import { fakeClock } from '../../api/mock-api.ts';

describe('TokenBucket', () => {
  it('lets a burst through at once, then spaces takes at the rate', async () => {
    const clock = fakeClock();
    const bucket = new TokenBucket({ ratePerSecond: 10, burst: 2, nowMs: clock.now, sleep: clock.sleep });
    expect(await bucket.take()).toBe(0);
    expect(await bucket.take()).toBe(0);
    expect(await bucket.take()).toBe(100);
    expect(clock.sleeps).toEqual([100]);
  });

  it('defaults the burst to half a second of the rate', async () => {
    const clock = fakeClock();
    const bucket = new TokenBucket({ ratePerSecond: 50, nowMs: clock.now, sleep: clock.sleep });
    expect(bucket.burst).toBe(25);
    for (let i = 0; i < 25; i++) await bucket.take();
    expect(clock.sleeps).toEqual([]);
    expect(bucket.waitFor()).toBe(20);
  });

  it('hands turns out in call order: callers that asked later wait longer', () => {
    const clock = fakeClock();
    const bucket = new TokenBucket({
      ratePerSecond: 10,
      burst: 1,
      nowMs: clock.now,
      sleep: () => new Promise(() => undefined),
    });
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      waits.push(bucket.waitFor());
      void bucket.take();
    }
    expect(waits).toEqual([0, 100, 200, 300]);
  });

  it('takes nothing when the turn is further away than the caller may wait', async () => {
    const clock = fakeClock();
    const bucket = new TokenBucket({ ratePerSecond: 10, burst: 1, nowMs: clock.now, sleep: clock.sleep });
    await bucket.take();
    expect(await bucket.take(1, { maxWaitMs: 50 })).toBeUndefined();
    expect(bucket.waitFor()).toBe(100);
  });

  it('takes a reservation ahead and gets back what was not spent', async () => {
    const clock = fakeClock();
    const bucket = new TokenBucket({ ratePerSecond: 10, burst: 2, nowMs: clock.now, sleep: clock.sleep });
    await bucket.take(2);
    expect(bucket.waitFor()).toBe(100);
    bucket.giveBack(1);
    expect(bucket.waitFor()).toBe(0);
  });

  it('holds every caller through a pause after a throttle answer, starts empty after it at half the rate', async () => {
    const clock = fakeClock();
    const bucket = new TokenBucket({ ratePerSecond: 10, burst: 5, nowMs: clock.now, sleep: clock.sleep });
    bucket.pause(2_000);
    expect(bucket.currentRate).toBe(5);
    expect(await bucket.take()).toBe(2_200);
    expect(bucket.waitFor()).toBe(200);
  });

  it('halves its rate once per crowded moment, never below a tenth, and climbs back to the stated rate once answers come', () => {
    const clock = fakeClock();
    const bucket = new TokenBucket({ ratePerSecond: 50, nowMs: clock.now, sleep: clock.sleep });
    bucket.pause(500);
    bucket.pause(300); // refused in the same moment: one event
    expect(bucket.currentRate).toBe(25);
    for (let i = 0; i < 5; i++) {
      clock.advance(1_000);
      bucket.pause(100);
    }
    expect(bucket.currentRate).toBe(5);
    for (let i = 0; i < 25; i++) bucket.answered();
    expect(bucket.currentRate).toBe(50);
  });

  it('gives the tokens back when the wait is aborted', async () => {
    const clock = fakeClock();
    const bucket = new TokenBucket({
      ratePerSecond: 10,
      burst: 1,
      nowMs: clock.now,
      sleep: (_ms, signal) => Promise.reject(signal?.reason as Error),
    });
    await bucket.take(1, {});
    const controller = new AbortController();
    controller.abort(new Error('shutdown'));
    await expect(bucket.take(1, { signal: controller.signal })).rejects.toThrow('shutdown');
    expect(bucket.waitFor()).toBe(100);
  });
});
