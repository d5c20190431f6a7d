// What one rotation costs in Secrets Manager requests (moto, through a counting proxy), and why
// each request the backend skips was safe to skip: the lock it holds and the intent marker it wrote
// are not read again while the lock has time left, but a lock that expired and was taken over
// makes it read (and leave the new holder's marker alone); remembered lock values and "missing"
// targets only choose the first call, and a stale one is corrected by AWS's own refusal. A fenced
// write adds only the move of AWSCURRENT while the lock it holds has its margin left.
import { randomUUID } from 'node:crypto';
import { CreateSecretCommand, DescribeSecretCommand } from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AwsBackendConfig } from '../../src/backends/aws/config.ts';
import type { Backend, HeldLock, Intent, StoreTarget } from '../../src/backends/types.ts';
import { runRotations } from '../../src/rotation/run.ts';
import { createTestClock, makeRecord, type TestClock } from '../backends/contract.ts';
import { JSON_SHAPE, keyPolicy, startBench } from '../rotation/harness.ts';
import { startAwsQuotaProxy } from '../support/aws-quota-proxy.ts';
import { makeBackend, motoEnv, newTarget, run, sdkClient } from './aws-fixtures.ts';
import { describeWithMoto } from '../support/moto.ts';
import type { MotoServer } from './servers.ts';

/** A loopback proxy in front of moto that records each request as `<Action> <target|lock>`. */
interface CountingProxy {
  endpoint: string;
  /** The requests since the last take(), sorted (concurrent probes arrive in any order). */
  take(): string[];
  close(): Promise<void>;
}

/** The quota proxy (AWS's documented quotas, far above what these tests send), recording each request. */
async function countingProxy(upstream: string): Promise<CountingProxy> {
  let seen: string[] = [];
  const proxy = await startAwsQuotaProxy({
    upstream,
    onRequest: (action, body) => {
      let id = '';
      try {
        const parsed = JSON.parse(body.toString('utf8')) as { SecretId?: string; Name?: string };
        id = parsed.SecretId ?? parsed.Name ?? '';
      } catch {
        // not a JSON request: counted by action only
      }
      seen.push(`${action} ${id.endsWith('.keyroll-lock') ? 'lock' : 'target'}`);
    },
  });
  return {
    endpoint: proxy.url,
    take: () => {
      const taken = seen.sort();
      seen = [];
      return taken;
    },
    close: () => proxy.close(),
  };
}

describeWithMoto('aws requests per rotation (moto)', ({ server }) => {
  let proxy: CountingProxy;
  /** moto as the backends see it: through the counting proxy. */
  let counted: MotoServer;

  beforeAll(async () => {
    proxy = await countingProxy(server.endpoint);
    counted = { ...server, endpoint: proxy.endpoint };
  });
  afterAll(async () => {
    await proxy.close();
  });

  describe('a rotation through the engine', () => {
    // Writes (PutSecretValue, UpdateSecretVersionStage) share the account's 50 per second, tags
    // (TagResource) another 50: a rotation of an existing secret spends 4 and 2 of them (issue 19;
    // before: 8 and 4, then 6 and 2). Reads share 10,000 per second.
    const PREFLIGHT_EXISTING = [
      'DescribeSecret target',
      'GetSecretValue target', // proves the read-back (a label no version carries)
      'ListSecretVersionIds target', // the versions AWS will not remove: room for this rotation's (issue 27)
      // No write probes: the key lock lives on the target, and its compare-and-swap (a PutSecretValue
      // and an UpdateSecretVersionStage there) proves both before the roll (invariant 1).
      // No TagResource: the intent marker's own TagResource proves it before the roll. No UntagResource at all.
    ];
    /** The lock on the target, taken from a released value: its compare-and-swap. */
    const LOCK_CAS = ['PutSecretValue target', 'UpdateSecretVersionStage target'];
    /**
     * The first lock on the target, once per secret: the companion is retired (read, compare-and-swap),
     * then the first KEYROLL_LOCK version put; preflight probes the stage move the first lock does not make.
     */
    const FIRST_TARGET_LOCK = [
      'UpdateSecretVersionStage target', // preflight's probe of the fenced write's move
      'GetSecretValue lock', // preflight's read found no KEYROLL_LOCK version on the target: the companion decides
      'PutSecretValue lock',
      'UpdateSecretVersionStage lock', // the companion retired: an earlier keyroll finds the key busy
      'PutSecretValue target', // the first lock version, with the token every runner derives alike
    ];
    const FINISH = [
      'DescribeSecret target', // readState under the lock (the lock itself is not read: this process holds it)
      'TagResource target', // setIntent
      'PutSecretValue target', // the write, durable under KEYROLL_PENDING
      'UpdateSecretVersionStage target', // the fence: AWSCURRENT moves from the version readState saw (no lock read: held with margin)
      'GetSecretValue target', // verify: read back
      'TagResource target', // record the rotation, clear its marker and give the lock back, one call (no release CAS)
    ];
    const WRITE_GROUP = /^(PutSecretValue|UpdateSecretVersionStage) /;
    const count = (requests: readonly string[], pattern: RegExp): number =>
      requests.filter((r) => pattern.test(r)).length;

    async function rotationBench(
      path: string,
      overrides: Parameters<typeof keyPolicy>[2] = {},
      quotas?: Record<string, number>,
    ) {
      return startBench({
        keys: (org) => [
          keyPolicy('key_demo_billing', org('key_demo_billing'), {
            destinations: [{ backend: 'aws', target: { path, shape: JSON_SHAPE } }],
            ...overrides,
          }),
        ],
        policy: {
          backends: {
            aws: AwsBackendConfig.parse({
              kind: 'aws',
              endpoint: counted.endpoint,
              createIfMissing: true,
              ...(quotas ? { quotas } : {}),
            }),
          },
        },
      });
    }

    it('costs 8 requests for a new secret, 14 for its first lock on the target, and 11 for an existing one, 4 of them writes and 2 tags (a new process each time)', async () => {
      const bench = await rotationBench(`keyroll-test/${run}/requests/${randomUUID().slice(0, 8)}`);
      const env = motoEnv(server);
      try {
        proxy.take();
        expect((await bench.run({ runtime: { env }, trigger: { force: true } })).rotated).toBe(1);
        expect(proxy.take()).toEqual(
          [
            'DescribeSecret target', // preflight: missing, createIfMissing
            'GetSecretValue target', // preflight: the lock's label on the target, read beside the description (nothing there)
            'CreateSecret lock', // the first lock: in the companion, since the target has no value to carry it
            'DescribeSecret target', // readState under the lock
            'CreateSecret target', // setIntent creates the secret empty, with the marker, at once
            'PutSecretValue target', // the first version: AWS makes it AWSCURRENT itself, no move follows
            'GetSecretValue target',
            'TagResource target', // the record gives the lock back: no release CAS
          ].sort(),
        );

        // The first rotation of a secret that has a value: its lock moves onto it, once.
        expect((await bench.run({ runtime: { env }, trigger: { force: true } })).rotated).toBe(1);
        const firstOnTarget = proxy.take();
        expect(firstOnTarget).toEqual([...PREFLIGHT_EXISTING, ...FIRST_TARGET_LOCK, ...FINISH].sort());
        expect(count(firstOnTarget, WRITE_GROUP)).toBe(6);

        expect((await bench.run({ runtime: { env }, trigger: { force: true } })).rotated).toBe(1);
        const existing = proxy.take();
        expect(existing).toEqual(
          [
            ...PREFLIGHT_EXISTING,
            // The preflight read the lock on the target beside its description: it holds the last
            // rotation's lock, given back by that rotation's record (the description saw the tag), so
            // the CAS takes it from there, with no read of its own.
            ...LOCK_CAS,
            ...FINISH,
          ].sort(),
        );
        expect(count(existing, WRITE_GROUP)).toBe(4);
        expect(count(existing, /^TagResource /)).toBe(2);
      } finally {
        await bench.close();
      }
    });

    it('costs 11 in a process that rotated the key before, and 13 for a scheduled run that checks due-ness first', async () => {
      // maxAge 1 ms: due again on every scheduled run, so the due-ness read before the lock happens.
      const bench = await rotationBench(`keyroll-test/${run}/requests/${randomUUID().slice(0, 8)}`, {
        maxAgeMs: 1,
        minIntervalMs: 0,
      });
      const runtime = await bench.runtime({ env: motoEnv(server) });
      const keys = bench.policy.keys;
      try {
        // The new secret (its lock on the companion), then its first lock on the target.
        for (let i = 0; i < 2; i++)
          expect(
            (
              await runRotations(runtime, {
                keys,
                trigger: { reason: 'manual', force: true },
                concurrency: 1,
              })
            ).rotated,
          ).toBe(1);
        proxy.take();
        // The daemon's case: the same backend instance rotates the key again. It goes straight to
        // the CAS from the lock value its own record gave back (AWS refuses it if the lock changed since).
        expect(
          (await runRotations(runtime, { keys, trigger: { reason: 'manual', force: true }, concurrency: 1 }))
            .rotated,
        ).toBe(1);
        expect(proxy.take()).toEqual([...PREFLIGHT_EXISTING, ...LOCK_CAS, ...FINISH].sort());

        // A scheduled run reads the state (target and its lock) to decide due-ness before any lock:
        // fresh, as `status` and `plan` do; the lock value it read is then the CAS's starting point.
        expect(
          (
            await runRotations(runtime, {
              keys,
              trigger: { reason: 'scheduled', force: false },
              concurrency: 1,
            })
          ).rotated,
        ).toBe(1);
        expect(proxy.take()).toEqual(
          [
            'DescribeSecret target',
            'GetSecretValue target',
            ...PREFLIGHT_EXISTING,
            ...LOCK_CAS,
            ...FINISH,
          ].sort(),
        );
      } finally {
        await runtime.close();
        await bench.close();
      }
    });

    it('probes a working secret for drift without its lock: no version added to the secret, one TagResource', async () => {
      // Not due (maxAge a day), drift check due on every run: the daemon's sweep every few minutes.
      const bench = await rotationBench(`keyroll-test/${run}/requests/${randomUUID().slice(0, 8)}`, {
        maxAgeMs: 24 * 3_600_000,
        minIntervalMs: 0,
        driftCheckMs: 1,
      });
      const runtime = await bench.runtime({ env: motoEnv(server) });
      const keys = bench.policy.keys;
      try {
        for (let i = 0; i < 2; i++)
          expect(
            (
              await runRotations(runtime, {
                keys,
                trigger: { reason: 'manual', force: true },
                concurrency: 1,
              })
            ).rotated,
          ).toBe(1);
        proxy.take();
        for (let sweep = 0; sweep < 3; sweep++) {
          const summary = await runRotations(runtime, {
            keys,
            trigger: { reason: 'scheduled', force: false },
            concurrency: 1,
          });
          expect(summary.rotated).toBe(0);
          // The due-ness read (target and its lock), the stored secret, the probe's record: a lock
          // taken here would put a version of the secret every sweep (AWS keeps ~100, lock/target.ts).
          expect(proxy.take()).toEqual([
            'DescribeSecret target',
            'GetSecretValue target',
            'GetSecretValue target',
            'TagResource target',
          ]);
        }
        expect(
          bench
            .events()
            .filter((e) => e.event === 'key.probe')
            .map((e) => e['verdict']),
        ).toEqual(['stored-secret-works', 'stored-secret-works', 'stored-secret-works']);
      } finally {
        await runtime.close();
        await bench.close();
      }
    });

    it('waits for its turns in the write quota before the roll, never between the roll answer and the write (the put and the move are reserved)', async () => {
      // Two writes per second with a burst of one: nearly every write-group call waits for its turn.
      const bench = await rotationBench(
        `keyroll-test/${run}/requests/${randomUUID().slice(0, 8)}`,
        {},
        { writesPerSecond: 2 },
      );
      const seen: string[] = [];
      const runtime = {
        env: motoEnv(server),
        observer: {
          stepDuration: () => undefined,
          exposure: () => undefined,
          paced: (event: { operation: string }) => seen.push(`paced ${event.operation}`),
        },
        checkpoint: (step: string) => {
          seen.push(`step ${step}`);
          return Promise.resolve();
        },
      };
      try {
        expect((await bench.run({ runtime, trigger: { force: true } })).rotated).toBe(1);
        seen.length = 0;
        expect((await bench.run({ runtime, trigger: { force: true } })).rotated).toBe(1);
        const roll = seen.indexOf('step roll');
        const stored = seen.indexOf('step store');
        expect(seen.slice(0, roll).filter((e) => e.startsWith('paced')).length).toBeGreaterThan(0);
        expect(seen.slice(roll, stored)).toEqual(['step roll']);
      } finally {
        await bench.close();
      }
    });
  });

  describe('what the backend knows under its lock, and when it stops trusting it', () => {
    let clock: TestClock;
    let a: Backend;
    let b: Backend;
    const intentOf = (rotationId: string, owner: string): Intent => ({
      rotationId,
      keyId: 'key_requests',
      owner,
      startedAt: '2030-01-01T00:00:00.000Z',
    });

    beforeAll(() => {
      clock = createTestClock();
      a = makeBackend(counted, clock);
      b = makeBackend(counted, clock);
    });
    afterAll(async () => {
      await Promise.all([a.close(), b.close()]);
    });

    async function holdAndMark(
      backend: Backend,
      t: StoreTarget,
      owner: string,
      ttlMs = 60_000,
    ): Promise<string> {
      const rotationId = randomUUID();
      const locked = await backend.acquireLock(t, { owner, rotationId, ttlMs });
      if (!locked.acquired) throw new Error('expected the lock');
      await backend.readState(t);
      await backend.setIntent(t, intentOf(rotationId, owner));
      return rotationId;
    }

    /** An existing target, locked by `a` for a new rotation, its state read under the lock. */
    async function lockedTarget(
      ttlMs: number,
    ): Promise<{ t: StoreTarget; lock: HeldLock; rotationId: string }> {
      const t = newTarget();
      await b.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
      const rotationId = randomUUID();
      const locked = await a.acquireLock(t, { owner: 'a', rotationId, ttlMs });
      if (!locked.acquired) throw new Error('expected the lock');
      await a.readState(t);
      return { t, lock: locked.lock, rotationId };
    }

    it('fences a write under a lock with margin left by the move alone; past the margin it reads the lock and the target first', async () => {
      const held = await lockedTarget(60_000);
      proxy.take();
      await a.writeSecret(held.t, makeRecord({ rotationId: held.rotationId }), { lock: held.lock });
      expect(proxy.take()).toEqual(['PutSecretValue target', 'UpdateSecretVersionStage target']);

      const late = await lockedTarget(60_000);
      clock.advance(46_000); // inside the 15 s margin: another runner's clock may already call the lock stale
      proxy.take();
      await a.writeSecret(late.t, makeRecord({ rotationId: late.rotationId }), { lock: late.lock });
      // The lock lives on the target: the description shows KEYROLL_LOCK still on the version this
      // process wrote (versions are immutable, so the lock is still ours), and the lock is not read.
      expect(proxy.take()).toEqual([
        'DescribeSecret target',
        'PutSecretValue target',
        'UpdateSecretVersionStage target',
      ]);
    });

    it('keeps what it knew under a refreshed lock: the fenced write after refreshLock reads nothing', async () => {
      const held = await lockedTarget(60_000);
      clock.advance(46_000);
      proxy.take();
      const refreshed = await a.refreshLock(held.t, held.lock, 60_000);
      if (refreshed === undefined) throw new Error('expected the refresh');
      // The CAS from the version this process holds, on the target: no read first.
      expect(proxy.take()).toEqual(['PutSecretValue target', 'UpdateSecretVersionStage target']);
      await a.writeSecret(held.t, makeRecord({ rotationId: held.rotationId }), { lock: refreshed });
      expect(proxy.take()).toEqual(['PutSecretValue target', 'UpdateSecretVersionStage target']);
    });

    it('records the rotation, the key it stored and clears its own marker in one TagResource while its lock has time left', async () => {
      const t = newTarget();
      const rotationId = await holdAndMark(a, t, 'a');
      const written = await a.writeSecret(t, makeRecord({ rotationId }));
      proxy.take();
      await a.recordRotation(
        t,
        { rotationId, rotatedAt: '2030-01-01T00:00:01.000Z', version: written.version, keyId: 'key_slot_b' },
        { clearIntent: true },
      );
      expect(proxy.take()).toEqual(['TagResource target']);
      const state = await b.readState(t);
      expect(state.intent).toBeUndefined();
      expect(state.lastRotationId).toBe(rotationId);
      expect(state.lastKeyId).toBe('key_slot_b');
    });

    it("records a drift probe in one TagResource and reads the standby slot's value in one GetSecretValue", async () => {
      const t = newTarget();
      await holdAndMark(a, t, 'a');
      await a.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
      await a.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
      proxy.take();
      await a.recordProbe(t, { at: '2030-01-01T00:00:02.000Z', result: 'works' });
      expect(proxy.take()).toEqual(['TagResource target']);
      expect(await a.readPrevious?.(t)).toBeDefined();
      expect(proxy.take()).toEqual(['GetSecretValue target']);
    });

    it('reads the marker again once its lock expired, and leaves the marker of the runner that took the lock over', async () => {
      const t = newTarget();
      const stale = await holdAndMark(a, t, 'a');
      const written = await a.writeSecret(t, makeRecord({ rotationId: stale }));
      clock.advance(61_000);
      // b takes the expired lock over and starts its own rotation.
      const fresh = await holdAndMark(b, t, 'b');
      proxy.take();
      await a.recordRotation(
        t,
        { rotationId: stale, rotatedAt: '2030-01-01T00:00:01.000Z', version: written.version },
        { clearIntent: true },
      );
      expect(proxy.take()).toEqual(['DescribeSecret target', 'TagResource target']);
      expect((await b.readState(t)).intent?.rotationId).toBe(fresh);
      await a.clearIntent(t, stale);
      expect((await b.readState(t)).intent?.rotationId).toBe(fresh);
    });

    it('stops trusting the lock a margin before it expires (a quarter of the TTL, at most a minute)', async () => {
      const t = newTarget();
      const rotationId = await holdAndMark(a, t, 'a');
      clock.advance(46_000); // 14 s left of 60 s: inside the 15 s margin
      proxy.take();
      const state = await a.readState(t);
      // A secret without a value keeps its lock on the companion: the target has no KEYROLL_LOCK version.
      expect(proxy.take()).toEqual(['DescribeSecret target', 'GetSecretValue lock', 'GetSecretValue target']);
      expect(state.lock).toMatchObject({ owner: 'a', rotationId });
      await a.clearIntent(t, rotationId);
      // Overwritten with the empty value: TagResource, never UntagResource.
      expect(proxy.take()).toEqual(['DescribeSecret target', 'TagResource target']);
      expect((await b.readState(t)).intent).toBeUndefined();
    });

    it('reports its own lock from readState without reading it, and the new holder once it was taken over', async () => {
      const t = newTarget();
      const rotationId = await holdAndMark(a, t, 'a');
      proxy.take();
      expect((await a.readState(t)).lock).toMatchObject({ owner: 'a', rotationId });
      expect(proxy.take()).toEqual(['DescribeSecret target']);
      clock.advance(61_000);
      await holdAndMark(b, t, 'b');
      expect((await a.readState(t)).lock).toMatchObject({ owner: 'b' });
    });

    it('gives its lock back with the finish record: releaseLock sends nothing, status shows no lock, and another runner takes it at once, not as a takeover', async () => {
      const t = newTarget();
      await b.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
      await b.preflight(t); // b described the target before a's record: it still sees a's lock as held
      const rotationId = randomUUID();
      const locked = await a.acquireLock(t, { owner: 'a', rotationId, ttlMs: 60_000 });
      if (!locked.acquired) throw new Error('expected the lock');
      await a.readState(t);
      await a.setIntent(t, intentOf(rotationId, 'a'));
      const written = await a.writeSecret(t, makeRecord({ rotationId }), { lock: locked.lock });
      proxy.take();
      await a.recordRotation(
        t,
        { rotationId, rotatedAt: '2030-01-01T00:00:01.000Z', version: written.version },
        { clearIntent: true, releaseLock: locked.lock },
      );
      expect(proxy.take()).toEqual(['TagResource target']);
      expect(await a.refreshLock(t, locked.lock, 60_000)).toEqual(locked.lock);
      await a.releaseLock(t, locked.lock);
      expect(proxy.take()).toEqual([]);

      // b described the target before a's first lock there: it finds the companion sealed, its own
      // first lock refused (a's is there), and reads that lock: held by a. b read the tags before the
      // record, so it reads them once more, sees the lock given back, and takes it with the CAS.
      const taken = await b.acquireLock(t, { owner: 'b', rotationId: randomUUID(), ttlMs: 60_000 });
      expect(taken).toMatchObject({ acquired: true, lock: { owner: 'b', tookOver: false } });
      expect(proxy.take()).toEqual(
        [
          'GetSecretValue lock',
          'PutSecretValue target',
          'GetSecretValue target',
          'DescribeSecret target',
          'PutSecretValue target',
          'UpdateSecretVersionStage target',
        ].sort(),
      );
      if (!taken.acquired) throw new Error('expected the lock');
      const c = makeBackend(counted, clock);
      try {
        expect((await c.readState(t)).lock).toMatchObject({ owner: 'b' });
        await b.releaseLock(t, taken.lock);
        expect((await c.readState(t)).lock).toBeUndefined();
      } finally {
        await c.close();
      }
    });

    it("gives a drift probe's lock back with the probe's record", async () => {
      const t = newTarget();
      await b.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
      const locked = await a.acquireLock(t, { owner: 'a', rotationId: randomUUID(), ttlMs: 60_000 });
      if (!locked.acquired) throw new Error('expected the lock');
      proxy.take();
      await a.recordProbe(
        t,
        { at: '2030-01-01T00:00:02.000Z', result: 'works' },
        { releaseLock: locked.lock },
      );
      await a.releaseLock(t, locked.lock);
      expect(proxy.take()).toEqual(['TagResource target']);
      expect((await b.readState(t)).lock).toBeUndefined();
    });

    it('leaves a lock held when the record names another rotation than the one holding it now', async () => {
      const t = newTarget();
      await b.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
      const stale = await a.acquireLock(t, { owner: 'a', rotationId: randomUUID(), ttlMs: 60_000 });
      if (!stale.acquired) throw new Error('expected the lock');
      clock.advance(61_000);
      const fresh = await b.acquireLock(t, { owner: 'b', rotationId: randomUUID(), ttlMs: 60_000 });
      expect(fresh).toMatchObject({ acquired: true, lock: { tookOver: true } });
      // a, paused past its lock's expiry, records and gives back the lock it no longer holds.
      await a.recordProbe(
        t,
        { at: '2030-01-01T00:00:03.000Z', result: 'works' },
        { releaseLock: stale.lock },
      );
      const c = makeBackend(counted, clock);
      try {
        expect((await c.readState(t)).lock).toMatchObject({ owner: 'b' });
        expect(await c.acquireLock(t, { owner: 'c', rotationId: randomUUID(), ttlMs: 60_000 })).toMatchObject(
          { acquired: false, holder: { owner: 'b' } },
        );
      } finally {
        await c.close();
      }
    });

    it('forgets its lock on release: readState reads the lock again', async () => {
      const t = newTarget();
      const rotationId = randomUUID();
      const locked = await a.acquireLock(t, { owner: 'a', rotationId, ttlMs: 60_000 });
      if (!locked.acquired) throw new Error('expected the lock');
      await a.releaseLock(t, locked.lock);
      proxy.take();
      expect((await a.readState(t)).lock).toBeUndefined();
      expect(proxy.take()).toEqual(['DescribeSecret target', 'GetSecretValue lock', 'GetSecretValue target']);
    });

    it('goes straight to the CAS from the lock it released, and answers busy (after a read) when another runner holds it now', async () => {
      const t = newTarget();
      const first = await a.acquireLock(t, { owner: 'a', rotationId: randomUUID(), ttlMs: 60_000 });
      if (!first.acquired) throw new Error('expected the lock');
      await a.releaseLock(t, first.lock);
      const held = await b.acquireLock(t, { owner: 'b', rotationId: randomUUID(), ttlMs: 60_000 });
      if (!held.acquired) throw new Error('expected b to take the released lock');
      proxy.take();
      expect(await a.acquireLock(t, { owner: 'a', rotationId: randomUUID(), ttlMs: 60_000 })).toMatchObject({
        acquired: false,
        holder: { owner: 'b' },
      });
      // The CAS from the remembered released version is refused; the read after it names the holder,
      // and one read of the target's tags shows b has not given it back with a record.
      expect(proxy.take()).toEqual([
        'DescribeSecret target',
        'GetSecretValue lock',
        'PutSecretValue lock',
        'UpdateSecretVersionStage lock',
      ]);
      // b's lock is untouched: b releases it, and then a gets it.
      await b.releaseLock(t, held.lock);
      expect((await a.acquireLock(t, { owner: 'a', rotationId: randomUUID(), ttlMs: 60_000 })).acquired).toBe(
        true,
      );
    });

    it('creates a target readState saw missing with the marker at once, and tags it when it was created meanwhile', async () => {
      const missing = newTarget();
      await holdAndMark(a, missing, 'a');
      const sdk = sdkClient(server);
      try {
        // Created by someone else between readState and setIntent: CreateSecret is refused, TagResource follows.
        const raced = newTarget();
        const rotationId = randomUUID();
        const locked = await a.acquireLock(raced, { owner: 'a', rotationId, ttlMs: 60_000 });
        if (!locked.acquired) throw new Error('expected the lock');
        expect((await a.readState(raced)).exists).toBe(false);
        await sdk.send(new CreateSecretCommand({ Name: raced.path }));
        proxy.take();
        await a.setIntent(raced, intentOf(rotationId, 'a'));
        expect(proxy.take()).toEqual(['CreateSecret target', 'TagResource target']);
        expect((await b.readState(raced)).intent?.rotationId).toBe(rotationId);
        const tags = (await sdk.send(new DescribeSecretCommand({ SecretId: missing.path }))).Tags ?? [];
        expect(tags.map((tag) => tag.Key)).toEqual(expect.arrayContaining(['managed-by', 'keyroll:intent']));
      } finally {
        sdk.destroy();
      }
    });

    it('writes a destination preflight saw missing with one CreateSecret, and puts into it when it was created meanwhile', async () => {
      const t = newTarget();
      expect((await a.preflight(t)).exists).toBe(false);
      proxy.take();
      const record = makeRecord({ rotationId: randomUUID() });
      expect(await a.writeSecret(t, record)).toEqual({ version: record.rotationId, alreadyApplied: false });
      expect(proxy.take()).toEqual(['CreateSecret target']);
      expect((await b.readSecret(t))?.secret.equals(record.secret)).toBe(true);

      const raced = newTarget();
      expect((await a.preflight(raced)).exists).toBe(false);
      await b.writeSecret(raced, makeRecord());
      const mine = makeRecord({ rotationId: randomUUID() });
      proxy.take();
      expect((await a.writeSecret(raced, mine)).alreadyApplied).toBe(false);
      expect(proxy.take()).toEqual(['CreateSecret target', 'PutSecretValue target']);
      expect((await b.readSecret(raced))?.secret.equals(mine.secret)).toBe(true);
    });
  });

  describe('preflight by purpose', () => {
    it('probes every permission for a check, and leaves to the lock and the intent marker what a rotation proves with them', async () => {
      const backend = makeBackend(counted, createTestClock());
      const t = newTarget();
      const sdk = sdkClient(server);
      try {
        await sdk.send(new CreateSecretCommand({ Name: t.path, SecretString: 'not a key' }));
        proxy.take();
        const check = await backend.preflight(t, 'check');
        expect(proxy.take()).toEqual([
          'DescribeSecret target',
          'GetSecretValue target',
          'PutSecretValue target', // refused by its reused token: proves the put without storing
          'TagResource target',
          'UpdateSecretVersionStage target', // moves no label
        ]);
        // The lock's compare-and-swap on the target is the put (its first lock: the stage move is still probed).
        await backend.preflight(t, 'rotation');
        expect(proxy.take()).toEqual([
          'DescribeSecret target',
          'GetSecretValue target',
          'ListSecretVersionIds target',
          'TagResource target',
          'UpdateSecretVersionStage target',
        ]);
        // The primary's intent marker is a TagResource on the same secret before the roll.
        await backend.preflight(t, 'rotation-primary');
        expect(proxy.take()).toEqual([
          'DescribeSecret target',
          'GetSecretValue target',
          'ListSecretVersionIds target',
          'UpdateSecretVersionStage target',
        ]);
        // Only a key its store rotates itself expects the store's rotation on (none is enabled here).
        const native = await backend.preflight(t, 'check-native');
        expect(native.checks.join('\n')).toContain('but has no rotation enabled');
        expect(check.checks.join('\n')).not.toContain('rotation enabled');
      } finally {
        sdk.destroy();
        await backend.close();
      }
    });
  });
});
