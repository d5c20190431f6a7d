// The fenced write and the lock refresh of the AWS backend (invariant 9) on moto, beyond the shared
// contract: what the staging labels look like after a fenced write, a refused one and a holder's
// write that had to move AWSCURRENT on from a version written without the lock; refreshes whose
// answer was lost; what readPrevious (AWSPREVIOUS, a two-slot entry's standby value) returns after
// each of them. Requests per fenced write: aws-requests.test.ts.
import { randomUUID } from 'node:crypto';
import {
  DescribeSecretCommand,
  PutSecretValueCommand,
  UpdateSecretVersionStageCommand,
} from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretsManagerCalls } from '../../src/backends/aws/client.ts';
import { refreshLock } from '../../src/backends/aws/lock/refresh.ts';
import { acquireLock } from '../../src/backends/aws/lock/lock.ts';
import { BackendError } from '../../src/backends/errors.ts';
import type { Backend, HeldLock, StoreTarget } from '../../src/backends/types.ts';
import { createTestClock, makeRecord, type TestClock } from '../backends/contract.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { lockHints, makeBackend, newTarget, rejection } from './aws-fixtures.ts';
import { describeWithMoto } from '../support/moto.ts';

describeWithMoto('aws fenced writes and lock refresh (moto)', ({ server, sdk }) => {
  let clock: TestClock;
  let a: Backend;
  let b: Backend;

  beforeAll(() => {
    clock = createTestClock();
    a = makeBackend(server, clock);
    b = makeBackend(server, clock);
  });
  afterAll(async () => {
    await Promise.all([a.close(), b.close()]);
  });

  /**
   * The target's versions and their labels, without its key lock's versions (labelled only
   * KEYROLL_LOCK, KEYROLL_LOCK_CANDIDATE or nothing: the lock lives on the target, lock/target.ts). A
   * lock version that carried AWSCURRENT or AWSPREVIOUS would stay in and fail the exact comparisons.
   */
  async function stagesOf(t: StoreTarget): Promise<Record<string, string[]>> {
    const stages = (await sdk.send(new DescribeSecretCommand({ SecretId: t.path }))).VersionIdsToStages ?? {};
    const lockOnly = (labels: readonly string[]): boolean =>
      labels.every((label) => label === 'KEYROLL_LOCK' || label === 'KEYROLL_LOCK_CANDIDATE');
    return Object.fromEntries(
      Object.entries(stages)
        .filter(([, labels]) => !lockOnly(labels))
        .map(([version, labels]) => [version, [...labels].sort()]),
    );
  }

  /** A target holding one value, locked by `backend` (which read its state under the lock). */
  async function lockedWithValue(
    backend: Backend,
    owner: string,
    ttlMs = 60_000,
  ): Promise<{ t: StoreTarget; lock: HeldLock; first: string }> {
    const t = newTarget();
    const first = (await backend.writeSecret(t, makeRecord({ rotationId: randomUUID() }))).version;
    const locked = await backend.acquireLock(t, { owner, rotationId: randomUUID(), ttlMs });
    if (!locked.acquired) throw new Error('expected the lock');
    await backend.readState(t);
    return { t, lock: locked.lock, first };
  }

  it('moves AWSCURRENT from the version read under the lock, leaving that one AWSPREVIOUS', async () => {
    const { t, lock, first } = await lockedWithValue(a, 'a');
    const record = makeRecord({ rotationId: randomUUID() });
    const written = await a.writeSecret(t, record, { lock });
    expect(written).toEqual({ version: record.rotationId, alreadyApplied: false });
    expect(await stagesOf(t)).toEqual({
      [first]: ['AWSPREVIOUS'],
      [written.version]: ['AWSCURRENT', 'KEYROLL_PENDING'],
    });
    expect((await b.readSecret(t))?.secret.equals(record.secret)).toBe(true);
  });

  it("readPrevious returns the value each fenced rotation replaced (a two-slot entry's standby value)", async () => {
    const t = newTarget({ format: 'json', fields: ['keyId', 'rotationId'] });
    const slotA = makeRecord({ rotationId: randomUUID(), keyId: 'key_slot_a' });
    await a.writeSecret(t, slotA);
    const rotations = [
      makeRecord({ rotationId: randomUUID(), keyId: 'key_slot_b' }),
      makeRecord({ rotationId: randomUUID(), keyId: 'key_slot_a' }),
    ];
    let replaced = slotA;
    for (const [i, record] of rotations.entries()) {
      // As the engine does it: lock, state under the lock, fenced write, release; each round by another runner.
      const runner = i % 2 === 0 ? a : b;
      const locked = await runner.acquireLock(t, {
        owner: `runner-${String(i)}`,
        rotationId: record.rotationId,
        ttlMs: 60_000,
      });
      if (!locked.acquired) throw new Error('expected the lock');
      await runner.readState(t);
      expect((await runner.writeSecret(t, record, { lock: locked.lock })).alreadyApplied).toBe(false);
      await runner.releaseLock(t, locked.lock);
      const previous = await a.readPrevious?.(t);
      expect(previous?.secret.equals(replaced.secret)).toBe(true);
      expect(previous?.rotationId).toBe(replaced.rotationId);
      expect((await b.readSecret(t))?.secret.equals(record.secret)).toBe(true);
      replaced = record;
    }
  });

  it('refuses a runner whose lock was taken over even before the new holder wrote, and changes no label', async () => {
    const { t, lock, first } = await lockedWithValue(a, 'a', 1_000);
    clock.advance(2_000);
    expect((await b.acquireLock(t, { owner: 'b', rotationId: randomUUID(), ttlMs: 60_000 })).acquired).toBe(
      true,
    );
    const late = makeRecord({ rotationId: randomUUID() });
    const error = await rejection(a.writeSecret(t, late, { lock }));
    expect(error).toMatchObject({ code: 'KR_LOCK_LOST', retryable: false, operation: 'write', kind: 'aws' });
    expect(error.message).toContain('held by b');
    expectNoSecrets([error.message], [late.secret.reveal()]);
    // Durable (the secret is not lost), but not what anyone reads, nor what readPrevious returns.
    expect(await stagesOf(t)).toEqual({ [first]: ['AWSCURRENT'], [late.rotationId]: ['KEYROLL_PENDING'] });
    expect(await b.readPrevious?.(t)).toBeUndefined();
  });

  it("keeps the holder's write winning when a version written without the lock got in after its read", async () => {
    const { t, lock } = await lockedWithValue(b, 'b');
    // A runner that lost its lock (or an operator) made another version current meanwhile.
    const put = await sdk.send(
      new PutSecretValueCommand({
        SecretId: t.path,
        SecretString: 'dead-value',
        VersionStages: ['ELSEWHERE'],
      }),
    );
    const stages = await stagesOf(t);
    const current = Object.keys(stages).find((version) => stages[version]?.includes('AWSCURRENT'));
    await sdk.send(
      new UpdateSecretVersionStageCommand({
        SecretId: t.path,
        VersionStage: 'AWSCURRENT',
        MoveToVersionId: put.VersionId,
        RemoveFromVersionId: current,
      }),
    );
    const record = makeRecord({ rotationId: randomUUID() });
    expect(await b.writeSecret(t, record, { lock })).toEqual({
      version: record.rotationId,
      alreadyApplied: false,
    });
    expect((await a.readSecret(t))?.secret.equals(record.secret)).toBe(true);
    expect((await stagesOf(t))[put.VersionId!]).toEqual(['AWSPREVIOUS', 'ELSEWHERE']);
    // The value the holder's write replaced is the one that got in, not the one read under the lock.
    expect((await a.readPrevious?.(t))?.secret.reveal()).toBe('dead-value');
  });

  it('reads the lock and the target when the lock is past its margin, and lands while nobody took it over', async () => {
    const { t, lock, first } = await lockedWithValue(a, 'a', 10_000);
    clock.advance(20_000); // expired, but nobody took it over: still this runner's lock
    const record = makeRecord({ rotationId: randomUUID() });
    expect((await a.writeSecret(t, record, { lock })).alreadyApplied).toBe(false);
    expect(await stagesOf(t)).toEqual({
      [first]: ['AWSPREVIOUS'],
      [record.rotationId]: ['AWSCURRENT', 'KEYROLL_PENDING'],
    });
  });

  it('a retry after a refusal in another process is refused too, and never made current', async () => {
    const { t, lock, first } = await lockedWithValue(a, 'a', 1_000);
    clock.advance(2_000);
    const taken = await b.acquireLock(t, { owner: 'b', rotationId: randomUUID(), ttlMs: 60_000 });
    if (!taken.acquired) throw new Error('expected the takeover');
    const late = makeRecord({ rotationId: randomUUID() });
    expect((await rejection(a.writeSecret(t, late, { lock }))).code).toBe('KR_LOCK_LOST');
    // A new process (no attempt log) puts the same version again: AWS ignores the repeat, the fence still refuses.
    const restarted = makeBackend(server, clock);
    try {
      expect((await rejection(restarted.writeSecret(t, late, { lock }))).code).toBe('KR_LOCK_LOST');
    } finally {
      await restarted.close();
    }
    expect((await stagesOf(t))[first]).toEqual(['AWSCURRENT']);
  });

  it('writes a secret created empty by the intent marker as its first version, current at once', async () => {
    const t = newTarget();
    const rotationId = randomUUID();
    const locked = await a.acquireLock(t, { owner: 'a', rotationId, ttlMs: 60_000 });
    if (!locked.acquired) throw new Error('expected the lock');
    await a.readState(t);
    await a.setIntent(t, { rotationId, keyId: 'k', owner: 'a', startedAt: clock.now().toISOString() });
    const record = makeRecord({ rotationId });
    expect(await a.writeSecret(t, record, { lock: locked.lock })).toEqual({
      version: rotationId,
      alreadyApplied: false,
    });
    expect(await stagesOf(t)).toEqual({ [rotationId]: ['AWSCURRENT', 'KEYROLL_PENDING'] });
    expect(await a.readPrevious?.(t)).toBeUndefined();
  });

  describe('refreshLock', () => {
    /** Calls whose next UpdateSecretVersionStage lands on moto but whose answer "times out". */
    class LostMoveCalls extends SecretsManagerCalls {
      loseNextMove = false;

      constructor() {
        super({
          backendName: 'lossy',
          endpoint: server.endpoint,
          region: server.region,
          timeoutMs: 10_000,
          credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
        });
      }

      override async moveCurrentStage(
        ...args: Parameters<SecretsManagerCalls['moveCurrentStage']>
      ): Promise<'moved' | 'stale'> {
        const answer = await super.moveCurrentStage(...args);
        if (this.loseNextMove) {
          this.loseNextMove = false;
          throw new BackendError('KR_BACKEND_TIMEOUT', 'lossy: answer lost', {
            backend: 'lossy',
            kind: 'aws',
            operation: 'lock',
            path: args[1],
          });
        }
        return answer;
      }
    }

    it('returns the lock as refreshed when the move that extended it landed but its answer was lost', async () => {
      const t = newTarget();
      const calls = new LostMoveCalls();
      const context = { calls, backendName: 'lossy', tags: {}, now: clock.now };
      try {
        const held = await acquireLock(
          context,
          t.path,
          { owner: 'a', rotationId: 'rot-a', ttlMs: 10_000 },
          lockHints(sdk, t.path),
        );
        if (!held.acquired) throw new Error('expected the lock');
        calls.loseNextMove = true;
        const refreshed = await refreshLock(context, t.path, held.lock, 60_000);
        expect(refreshed).toMatchObject({
          owner: 'a',
          rotationId: 'rot-a',
          expiresAt: new Date(clock.now().getTime() + 60_000).toISOString(),
        });
        expect(refreshed?.token).not.toBe(held.lock.token);
      } finally {
        await calls.close();
      }
    });

    it('extends its own lock from the version that a refresh whose answer was lost left behind', async () => {
      const t = newTarget();
      const held = await a.acquireLock(t, { owner: 'a', rotationId: 'rot-a', ttlMs: 10_000 });
      if (!held.acquired) throw new Error('expected the lock');
      const newer = await a.refreshLock(t, held.lock, 10_000);
      expect(newer).toBeDefined();
      // The caller still has the older HeldLock (as after a refresh whose answer it never got).
      const again = await a.refreshLock(t, held.lock, 30_000);
      expect(again).toMatchObject({
        owner: 'a',
        rotationId: 'rot-a',
        expiresAt: new Date(clock.now().getTime() + 30_000).toISOString(),
      });
      expect((await b.readState(t)).lock).toMatchObject({ owner: 'a', expiresAt: again?.expiresAt });
    });
  });
});
