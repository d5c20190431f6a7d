// The AWS key lock moves from the companion `<name>.keyroll-lock` (where every earlier keyroll keeps
// it) onto the secret itself (src/backends/aws/lock/companion.ts, closeCompanion), on moto. During an
// upgrade both versions run at once, so invariants 5 and 9 hold across them: a lock an earlier
// keyroll holds in the companion keeps this one out; a companion this one sealed keeps every earlier
// keyroll out for good; an earlier runner that takes the companion between this one's read and its
// seal wins. An earlier keyroll is played by its own calls: it reads the companion's AWSCURRENT and
// changes it with the same compare-and-swap (put a candidate, move AWSCURRENT from the version read).
import {
  CreateSecretCommand,
  DescribeSecretCommand,
  GetSecretValueCommand,
  PutSecretValueCommand,
  UpdateSecretVersionStageCommand,
} from '@aws-sdk/client-secrets-manager';
import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import { acquireLock } from '../../src/backends/aws/lock/lock.ts';
import { lockSecretName } from '../../src/backends/aws/lock/companion.ts';
import { LOCK_STAGE, lockVersionOf } from '../../src/backends/aws/lock/target.ts';
import { blockingHolder, parseLockValue, type LockValue } from '../../src/backends/aws/lock/value.ts';
import type { StoreTarget } from '../../src/backends/types.ts';
import { createTestClock } from '../backends/contract.ts';
import { GatedCalls, lockHints, makeBackend, newTarget } from './aws-fixtures.ts';
import { describeWithMoto } from '../support/moto.ts';

const MINUTE = 60_000;

describeWithMoto('aws lock: moving it from the companion onto the secret (moto)', ({ server, sdk }) => {
  const VALUE = 'sk_live_the_value_consumers_read_4711';

  /** A secret with a value, and the companion an earlier keyroll left holding `lock`. */
  async function upgradedTarget(lock: LockValue): Promise<StoreTarget> {
    const t = newTarget();
    await sdk.send(new CreateSecretCommand({ Name: t.path, SecretString: VALUE }));
    await sdk.send(
      new CreateSecretCommand({ Name: lockSecretName(t.path), SecretString: JSON.stringify(lock) }),
    );
    return t;
  }

  async function companion(t: StoreTarget): Promise<{ versionId: string; value: LockValue | undefined }> {
    const answer = await sdk.send(
      new GetSecretValueCommand({ SecretId: lockSecretName(t.path), VersionStage: 'AWSCURRENT' }),
    );
    return { versionId: answer.VersionId ?? '', value: parseLockValue(answer.SecretString) };
  }

  /** What an earlier keyroll does to take the companion: the compare-and-swap from the version it read. */
  async function earlierKeyrollTakes(t: StoreTarget, from: string, value: LockValue): Promise<void> {
    const candidate = randomUUID();
    await sdk.send(
      new PutSecretValueCommand({
        SecretId: lockSecretName(t.path),
        SecretString: JSON.stringify(value),
        ClientRequestToken: candidate,
        VersionStages: ['KEYROLL_CANDIDATE'],
      }),
    );
    await sdk.send(
      new UpdateSecretVersionStageCommand({
        SecretId: lockSecretName(t.path),
        VersionStage: 'AWSCURRENT',
        MoveToVersionId: candidate,
        RemoveFromVersionId: from,
      }),
    );
  }

  async function lockOnSecret(t: StoreTarget): Promise<string | undefined> {
    return lockVersionOf(
      (await sdk.send(new DescribeSecretCommand({ SecretId: t.path }))).VersionIdsToStages,
    );
  }

  async function currentValue(t: StoreTarget): Promise<string | undefined> {
    return (await sdk.send(new GetSecretValueCommand({ SecretId: t.path, VersionStage: 'AWSCURRENT' })))
      .SecretString;
  }

  it('answers busy while an earlier keyroll holds the companion, and puts nothing on the secret', async () => {
    const clock = createTestClock();
    const t = await upgradedTarget({
      state: 'held',
      owner: 'earlier-keyroll',
      rotationId: 'r-old',
      expiresAt: new Date(clock.now().getTime() + 10 * MINUTE).toISOString(),
    });
    const backend = makeBackend(server, clock);
    try {
      const outcome = await backend.acquireLock(t, { owner: 'new', rotationId: 'r-new', ttlMs: MINUTE });
      expect(outcome).toMatchObject({
        acquired: false,
        holder: { owner: 'earlier-keyroll', rotationId: 'r-old' },
      });
      expect(await lockOnSecret(t)).toBeUndefined();
      expect((await companion(t)).value).toMatchObject({ state: 'held', owner: 'earlier-keyroll' });
    } finally {
      await backend.close();
    }
  });

  it('seals a companion an earlier keyroll released and takes the lock on the secret; an earlier keyroll then finds the key busy for good', async () => {
    const clock = createTestClock();
    const t = await upgradedTarget({
      state: 'released',
      owner: 'earlier-keyroll',
      rotationId: 'r-old',
      releasedAt: clock.now().toISOString(),
    });
    const backend = makeBackend(server, clock);
    try {
      const outcome = await backend.acquireLock(t, { owner: 'new', rotationId: 'r-new', ttlMs: MINUTE });
      expect(outcome).toMatchObject({ acquired: true, lock: { owner: 'new', tookOver: false } });
      expect(await lockOnSecret(t)).toBeDefined();
      // The lock is not what consumers read: AWSCURRENT still holds the value.
      expect(await currentValue(t)).toBe(VALUE);
      const lockValue = parseLockValue(
        (await sdk.send(new GetSecretValueCommand({ SecretId: t.path, VersionStage: LOCK_STAGE })))
          .SecretString,
      );
      expect(lockValue).toMatchObject({ state: 'held', owner: 'new', rotationId: 'r-new' });
      // An earlier keyroll reads the companion and sees it held, never stale, by nobody it knows.
      const sealed = (await companion(t)).value;
      if (sealed === undefined) throw new Error('expected a lock value');
      const yearsLater = new Date(clock.now().getTime() + 5 * 365 * 24 * 60 * MINUTE);
      expect(
        blockingHolder(
          sealed,
          { owner: 'earlier-keyroll', rotationId: 'r-next', ttlMs: MINUTE, clockSkewMs: MINUTE },
          yearsLater,
          false,
        ),
      ).toBeDefined();
      // `status` of this keyroll shows the holder on the secret, not the seal.
      expect((await backend.readState(t)).lock).toMatchObject({ owner: 'new', rotationId: 'r-new' });
    } finally {
      await backend.close();
    }
  });

  it('takes over a stale lock an earlier keyroll left in the companion, as a takeover (its runner may still act)', async () => {
    const clock = createTestClock();
    const t = await upgradedTarget({
      state: 'held',
      owner: 'earlier-keyroll',
      rotationId: 'r-old',
      expiresAt: new Date(clock.now().getTime() - 10 * MINUTE).toISOString(),
    });
    const backend = makeBackend(server, clock);
    try {
      const outcome = await backend.acquireLock(t, { owner: 'new', rotationId: 'r-new', ttlMs: MINUTE });
      expect(outcome).toMatchObject({ acquired: true, lock: { owner: 'new', tookOver: true } });
      expect(await lockOnSecret(t)).toBeDefined();
    } finally {
      await backend.close();
    }
  });

  // The companion's seal: a read, then the compare-and-swap. An earlier keyroll that takes the
  // released companion in between must win, and this one must not put a lock on the secret.
  it('loses to an earlier keyroll that takes the companion between its read and its seal: busy, nothing on the secret', async () => {
    const clock = createTestClock();
    const t = await upgradedTarget({
      state: 'released',
      owner: 'earlier-keyroll',
      rotationId: 'r-old',
      releasedAt: clock.now().toISOString(),
    });
    const read = await companion(t);
    const calls = new GatedCalls(server);
    try {
      const taking = acquireLock(
        { calls, backendName: 'gated', tags: {}, now: clock.now },
        t.path,
        { owner: 'new', rotationId: 'r-new', ttlMs: MINUTE },
        lockHints(sdk, t.path),
      );
      await calls.arrived;
      await earlierKeyrollTakes(t, read.versionId, {
        state: 'held',
        owner: 'earlier-keyroll',
        rotationId: 'r-old-2',
        expiresAt: new Date(clock.now().getTime() + 10 * MINUTE).toISOString(),
      });
      calls.open();
      expect(await taking).toMatchObject({
        acquired: false,
        holder: { owner: 'earlier-keyroll', rotationId: 'r-old-2' },
      });
      expect(await lockOnSecret(t)).toBeUndefined();
      expect((await companion(t)).value).toMatchObject({
        state: 'held',
        owner: 'earlier-keyroll',
        rotationId: 'r-old-2',
      });
    } finally {
      await calls.close();
    }
  });
});
