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

  describe('reservations (a routine run reserves its keys; each hold starts with the key work)', () => {
    it('a waiting trigger takes over a reservation not started yet, at once', async () => {
      const locks = new KeyLocks();
      const reservations = Array.from({ length: 50 }, (_, i) => locks.reserve(`k${i}`));
      expect(reservations.every((r) => r !== undefined)).toBe(true);
      // A second routine run finds them busy, as before.
      expect(locks.reserve('k40')).toBeUndefined();
      expect(locks.tryAcquire('k40')).toBeUndefined();
      const leak = await locks.acquire('k40');
      // The run reaches k40 later: it is not its any more, and its release frees nothing.
      expect(reservations[40]?.start()).toBe(false);
      reservations[40]?.release();
      expect(locks.isHeld('k40')).toBe(true);
      leak();
      expect(locks.isHeld('k40')).toBe(false);
      expect(reservations[0]?.start()).toBe(true);
    });

    it('a started reservation is never taken over: the trigger waits for its release', async () => {
      const locks = new KeyLocks();
      const reservation = locks.reserve('k1');
      expect(reservation?.start()).toBe(true);
      let granted = false;
      const waiting = locks.acquire('k1').then((release) => {
        granted = true;
        return release;
      });
      await Promise.resolve();
      expect(granted).toBe(false);
      reservation?.release();
      const release = await waiting;
      expect(granted).toBe(true);
      expect(locks.isHeld('k1')).toBe(true);
      release();
      expect(locks.isHeld('k1')).toBe(false);
    });

    it('a second trigger waits behind the first one that took a reservation over', async () => {
      const locks = new KeyLocks();
      const reservation = locks.reserve('k1');
      const first = await locks.acquire('k1');
      let second = false;
      const waiting = locks.acquire('k1').then((release) => {
        second = true;
        return release;
      });
      await Promise.resolve();
      expect(second).toBe(false);
      reservation?.release();
      expect(second).toBe(false);
      first();
      (await waiting)();
      expect(locks.isHeld('k1')).toBe(false);
    });
  });
});
