// The key-lock primitive (src/rotation/key-lock.ts) on real file backends: a runner that finds one
// of a key's locks busy leaves none of the others held (invariant 5: the key stays free for the
// holder and for nobody else's wait), and short work gives its lock back however it ends.
import { describe, expect, it } from 'vitest';
import { FileBackend } from '../../src/backends/file/backend.ts';
import type { HeldLock, StoreTarget } from '../../src/backends/types.ts';
import { releaseKeyLock, takeKeyLock, underKeyLock } from '../../src/rotation/key-lock.ts';
import type { ResolvedDestination } from '../../src/rotation/types.ts';
import { useTempDir } from '../support/temp-dir.ts';

const target: StoreTarget = { path: 'app/key', shape: { format: 'raw', secretField: 'apiKey', fields: [] } };
const key = { lockTtlMs: 60_000, clockSkewMs: 0 };

describe('the key lock', () => {
  const dir = useTempDir('keyroll-key-lock-');

  function destinations(): ResolvedDestination[] {
    return ['primary', 'second'].map((name) => ({
      backendName: name,
      backend: new FileBackend(name, { kind: 'file', directory: `${dir.path()}/${name}` }),
      target,
    }));
  }

  it('takes every destination in order, the primary first', async () => {
    const [primary, second] = destinations();
    const taken = await takeKeyLock({
      key,
      destinations: [primary!, second!],
      owner: 'runner-a',
      rotationId: 'r1',
    });
    expect('held' in taken && taken.held.map((kept) => kept.destination.backendName)).toEqual([
      'primary',
      'second',
    ]);
  });

  it('gives back the locks it took when a later destination is busy, and names where', async () => {
    const [primary, second] = destinations();
    const other = await second!.backend.acquireLock(target, {
      owner: 'runner-b',
      rotationId: 'r0',
      ttlMs: 60_000,
    });
    expect(other.acquired).toBe(true);
    const taken = await takeKeyLock({
      key,
      destinations: [primary!, second!],
      owner: 'runner-a',
      rotationId: 'r1',
    });
    expect(taken).toMatchObject({
      busy: { owner: 'runner-b', rotationId: 'r0' },
      at: { backendName: 'second' },
      heldBefore: 1,
    });
    // The primary's lock is free again: a third runner takes it at once, without a takeover.
    const third = await primary!.backend.acquireLock(target, {
      owner: 'runner-c',
      rotationId: 'r2',
      ttlMs: 60_000,
    });
    expect(third).toMatchObject({ acquired: true, lock: { tookOver: false } });
  });

  it('gives the lock back after short work, even when the work throws', async () => {
    const [primary] = destinations();
    const request = { key, destinations: [primary!], owner: 'runner-a', rotationId: 'r1' };
    await expect(underKeyLock(request, () => Promise.reject(new Error('work failed')))).rejects.toThrow(
      'work failed',
    );
    await expect(
      underKeyLock({ ...request, owner: 'runner-b', rotationId: 'r2' }, () => Promise.resolve('done')),
    ).resolves.toEqual({ done: 'done' });
  });

  it('reports busy with the holder instead of running the work', async () => {
    const [primary] = destinations();
    await primary!.backend.acquireLock(target, { owner: 'runner-b', rotationId: 'r0', ttlMs: 60_000 });
    let ran = false;
    const result = await underKeyLock(
      { key, destinations: [primary!], owner: 'runner-a', rotationId: 'r1' },
      () => {
        ran = true;
        return Promise.resolve();
      },
    );
    expect(result).toMatchObject({ busy: { owner: 'runner-b', rotationId: 'r0' } });
    expect(ran).toBe(false);
  });

  it('releases the last taken first, goes on past a release that fails, and says not all were released', async () => {
    const [primary, second] = destinations();
    const taken = await takeKeyLock({
      key,
      destinations: [primary!, second!],
      owner: 'runner-a',
      rotationId: 'r1',
    });
    if (!('held' in taken)) throw new Error('expected the locks');
    const calls: string[] = [];
    /** The destination, its releases recorded; `fails` makes them throw without releasing. */
    const recorded = (destination: ResolvedDestination, fails: boolean): ResolvedDestination => {
      const { backend } = destination;
      const releaseLock = (releasing: StoreTarget, lock: HeldLock): Promise<void> => {
        calls.push(destination.backendName);
        return fails ? Promise.reject(new Error('unreachable')) : backend.releaseLock(releasing, lock);
      };
      return {
        ...destination,
        backend: new Proxy(backend, {
          get: (real, property) =>
            property === 'releaseLock' ? releaseLock : (Reflect.get(real, property) as unknown),
        }),
      };
    };
    const held = taken.held.map((kept) => ({
      ...kept,
      destination: recorded(kept.destination, kept.destination === second),
    }));
    const failed: string[] = [];
    const released = await releaseKeyLock(held, (destination) => failed.push(destination.backendName));
    expect(released).toBe(false);
    expect(calls).toEqual(['second', 'primary']);
    expect(failed).toEqual(['second']);
    // The primary's lock, released after the failed one, is free.
    const next = await primary!.backend.acquireLock(target, {
      owner: 'runner-b',
      rotationId: 'r2',
      ttlMs: 60_000,
    });
    expect(next).toMatchObject({ acquired: true, lock: { tookOver: false } });
  });

  // Issue 30: a holder proven dead is not waited for; one not proven is.
  describe('with a prover of dead holders', () => {
    async function heldBy(destination: ResolvedDestination, owner: string): Promise<void> {
      const held = await destination.backend.acquireLock(target, { owner, rotationId: 'r0', ttlMs: 600_000 });
      expect(held.acquired).toBe(true);
    }

    it('takes a lock over at once from a holder proven dead, and says whose and why', async () => {
      const [primary, second] = destinations();
      await heldBy(second!, 'runner-dead');
      const asked: string[] = [];
      const taken = await takeKeyLock({
        key,
        destinations: [primary!, second!],
        owner: 'runner-a',
        rotationId: 'r1',
        proveHolderDead: (holder) => {
          asked.push(holder.owner);
          return Promise.resolve({ kind: 'pod-gone', pod: 'keyroll/keyroll-a' });
        },
      });
      expect(asked).toEqual(['runner-dead']);
      if (!('held' in taken)) throw new Error('expected the locks');
      expect(taken.held.map((kept) => [kept.destination.backendName, kept.lock.tookOver])).toEqual([
        ['primary', false],
        ['second', true],
      ]);
      expect(taken.deadHolders).toEqual([
        {
          holder: expect.objectContaining({ owner: 'runner-dead', rotationId: 'r0' }) as unknown,
          proof: { kind: 'pod-gone', pod: 'keyroll/keyroll-a' },
          at: second,
        },
      ]);
    });

    it('leaves a lock whose holder is not proven dead busy, and gives back what it took', async () => {
      const [primary, second] = destinations();
      await heldBy(second!, 'runner-alive');
      const taken = await takeKeyLock({
        key,
        destinations: [primary!, second!],
        owner: 'runner-a',
        rotationId: 'r1',
        proveHolderDead: () => Promise.resolve(undefined),
      });
      expect(taken).toMatchObject({ busy: { owner: 'runner-alive' }, heldBefore: 1 });
      const third = await primary!.backend.acquireLock(target, {
        owner: 'runner-c',
        rotationId: 'r2',
        ttlMs: 1,
      });
      expect(third.acquired).toBe(true);
    });

    it('never asks about its own lock (another rotation of this process)', async () => {
      const [primary] = destinations();
      await heldBy(primary!, 'runner-a');
      const asked: string[] = [];
      const taken = await takeKeyLock({
        key,
        destinations: [primary!],
        owner: 'runner-a',
        rotationId: 'r1',
        proveHolderDead: (holder) => {
          asked.push(holder.owner);
          return Promise.resolve({ kind: 'pod-gone', pod: 'x' });
        },
      });
      expect(taken).toMatchObject({ busy: { owner: 'runner-a', rotationId: 'r0' } });
      expect(asked).toEqual([]);
    });
  });
});
