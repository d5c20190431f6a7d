// The daemon's in-process key locks: one holder per key, tries never wait, waiters are served in
// order and before later tries, a release is idempotent, and an aborted waiter leaves the queue.
import { describe, expect, it } from 'vitest';
import { KeyLocks } from '../../src/scheduler/key-locks.ts';

describe('KeyLocks', () => {
  it('gives a free key to the first try and refuses a second try until released', () => {
    const locks = new KeyLocks();
    const release = locks.tryAcquire('k1');
    expect(release).toBeTypeOf('function');
    expect(locks.tryAcquire('k1')).toBeUndefined();
    expect(locks.tryAcquire('k2')).toBeTypeOf('function');
    release?.();
    expect(locks.isHeld('k1')).toBe(false);
    expect(locks.tryAcquire('k1')).toBeTypeOf('function');
  });

  it('hands a released key straight to the waiter, ahead of any later try', async () => {
    const locks = new KeyLocks();
    const release = locks.tryAcquire('k1');
    const waiting = locks.acquire('k1');
    release?.();
    // Handed over without a gap: a tick arriving now finds it taken.
    expect(locks.tryAcquire('k1')).toBeUndefined();
    const next = await waiting;
    expect(locks.isHeld('k1')).toBe(true);
    next();
    expect(locks.isHeld('k1')).toBe(false);
  });

  it('refuses a try while someone waits, even between holders', () => {
    const locks = new KeyLocks();
    locks.tryAcquire('k1');
    void locks.acquire('k1');
    expect(locks.tryAcquire('k1')).toBeUndefined();
  });

  it('serves waiters first come, first served', async () => {
    const locks = new KeyLocks();
    const release = locks.tryAcquire('k1');
    const order: string[] = [];
    const a = locks.acquire('k1').then((r) => {
      order.push('a');
      r();
    });
    const b = locks.acquire('k1').then((r) => {
      order.push('b');
      r();
    });
    release?.();
    await Promise.all([a, b]);
    expect(order).toEqual(['a', 'b']);
  });

  it('a second call of a release function does not free the key from its next holder', async () => {
    const locks = new KeyLocks();
    const first = locks.tryAcquire('k1');
    const waiting = locks.acquire('k1');
    first?.();
    await waiting;
    first?.();
    expect(locks.isHeld('k1')).toBe(true);
  });

  it('an aborted waiter rejects with the reason and leaves the queue', async () => {
    const locks = new KeyLocks();
    const release = locks.tryAcquire('k1');
    const controller = new AbortController();
    const waiting = locks.acquire('k1', controller.signal);
    controller.abort(new Error('shutdown'));
    await expect(waiting).rejects.toThrow('shutdown');
    release?.();
    expect(locks.isHeld('k1')).toBe(false);
    expect(locks.tryAcquire('k1')).toBeTypeOf('function');
  });
});
