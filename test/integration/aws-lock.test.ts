// The AWS key lock under contention, on moto, at both places it lives (src/backends/aws/lock.ts):
// on the secret itself (a target that has a value: the version labelled KEYROLL_LOCK) and in the
// companion `<name>.keyroll-lock` (a target without a value yet). Several runners racing for one
// stale lock, and the compare-and-swap interleaving forced step by step; lock changes whose answer
// is lost; locks an operator broke (a foreign value, a deletion). The lock's move from the
// companion onto the secret, against runners of the earlier keyroll: aws-lock-upgrade.test.ts.
import {
  DeleteSecretCommand,
  DescribeSecretCommand,
  PutSecretValueCommand,
  UpdateSecretVersionStageCommand,
} from '@aws-sdk/client-secrets-manager';
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { SecretsManagerCalls } from '../../src/backends/aws/client.ts';
import { acquireLock } from '../../src/backends/aws/lock/lock.ts';
import { LOCK_STAGE } from '../../src/backends/aws/lock/target.ts';
import { SEALED } from '../../src/backends/aws/lock/value.ts';
import { BackendError } from '../../src/backends/errors.ts';
import type { StoreTarget } from '../../src/backends/types.ts';
import { createTestClock, makeRecord } from '../backends/contract.ts';
import { GatedCalls, lockHints, makeBackend, newTarget, rejection } from './aws-fixtures.ts';
import { describeWithMoto } from '../support/moto.ts';

describeWithMoto('aws lock (moto)', ({ server, sdk }) => {
  /** Calls to moto as a backend of its own makes them (no pacing surprises: the documented quotas). */
  const callsOptions = (backendName: string) => ({
    backendName,
    endpoint: server.endpoint,
    region: server.region,
    timeoutMs: 10_000,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
  });

  const places: { where: string; target: () => Promise<StoreTarget> }[] = [
    {
      where: 'on the secret itself (a target with a value)',
      target: async () => {
        const t = newTarget();
        const writer = makeBackend(server, createTestClock());
        try {
          await writer.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
        } finally {
          await writer.close();
        }
        return t;
      },
    },
    { where: 'in the companion (a target without a value yet)', target: () => Promise.resolve(newTarget()) },
  ];

  describe.each(places)('the lock $where', ({ target }) => {
    it('goes to exactly one of several runners racing for the same stale lock', async () => {
      const clock = createTestClock();
      const runners = [makeBackend(server, clock), makeBackend(server, clock), makeBackend(server, clock)];
      try {
        for (let round = 0; round < 3; round++) {
          const t = await target();
          const [first] = runners;
          expect(
            (await first!.acquireLock(t, { owner: 'old', rotationId: 'old', ttlMs: 1_000 })).acquired,
          ).toBe(true);
          clock.advance(2_000);
          const outcomes = await Promise.all(
            runners.map((r, i) =>
              r.acquireLock(t, {
                owner: `taker-${String(i)}`,
                rotationId: `rot-${String(i)}`,
                ttlMs: 60_000,
              }),
            ),
          );
          const winners = outcomes.filter((o) => o.acquired);
          expect(winners).toHaveLength(1);
          const winner = winners[0]!.lock;
          expect(winner.tookOver).toBe(true);
          for (const loser of outcomes.filter((o) => !o.acquired))
            expect(loser.holder.owner).toBe(winner.owner);
          expect((await first!.readState(t)).lock?.owner).toBe(winner.owner);
        }
      } finally {
        await Promise.all(runners.map((r) => r.close()));
      }
    });

    it('gives the first lock to exactly one of several runners', async () => {
      const clock = createTestClock();
      const runners = [makeBackend(server, clock), makeBackend(server, clock), makeBackend(server, clock)];
      try {
        const t = await target();
        const outcomes = await Promise.all(
          runners.map((r, i) =>
            r.acquireLock(t, { owner: `first-${String(i)}`, rotationId: `rot-${String(i)}`, ttlMs: 60_000 }),
          ),
        );
        expect(outcomes.filter((o) => o.acquired)).toHaveLength(1);
      } finally {
        await Promise.all(runners.map((r) => r.close()));
      }
    });

    // Both takers read the same stale version and put their candidates before either moves the
    // label: the interleaving a timing race only sometimes produces, forced by a gate.
    it('refuses the second move of the lock from the same stale version', async () => {
      const clock = createTestClock();
      const t = await target();
      const first = makeBackend(server, clock);
      const [a, b] = [new GatedCalls(server), new GatedCalls(server)];
      const context = (calls: SecretsManagerCalls) => ({
        calls,
        backendName: 'gated',
        tags: {},
        now: clock.now,
      });
      try {
        expect((await first.acquireLock(t, { owner: 'old', rotationId: 'old', ttlMs: 1_000 })).acquired).toBe(
          true,
        );
        clock.advance(2_000);
        const takeA = acquireLock(
          context(a),
          t.path,
          { owner: 'a', rotationId: 'rot-a', ttlMs: 60_000 },
          lockHints(sdk, t.path),
        );
        const takeB = acquireLock(
          context(b),
          t.path,
          { owner: 'b', rotationId: 'rot-b', ttlMs: 60_000 },
          lockHints(sdk, t.path),
        );
        await Promise.all([a.arrived, b.arrived]);
        a.open();
        expect(await takeA).toMatchObject({ acquired: true, lock: { owner: 'a', tookOver: true } });
        b.open();
        expect(await takeB).toEqual({
          acquired: false,
          holder: expect.objectContaining({ owner: 'a' }) as unknown,
        });
        expect(b.moves).toEqual(['stale']);
      } finally {
        await Promise.all([first.close(), a.close(), b.close()]);
      }
    });

    describe('a lock change whose answer is lost', () => {
      /** Calls whose chosen action reaches moto and lands, but whose answer "times out". */
      class LostAnswerCalls extends SecretsManagerCalls {
        lose: 'first' | 'move' | undefined;
        /** GetSecretValue calls to fail (as unavailable) after the lost answer. */
        failReads = 0;

        constructor(lose: LostAnswerCalls['lose']) {
          super(callsOptions('lossy'));
          this.lose = lose;
        }

        #lost(path: string): BackendError {
          this.lose = undefined;
          return new BackendError('KR_BACKEND_TIMEOUT', `lossy: answer for ${path} lost`, {
            backend: 'lossy',
            kind: 'aws',
            operation: 'lock',
            path,
          });
        }

        // The first lock: CreateSecret of the companion, or the labelled put on the target.
        override async createSecret(
          ...args: Parameters<SecretsManagerCalls['createSecret']>
        ): ReturnType<SecretsManagerCalls['createSecret']> {
          const answer = await super.createSecret(...args);
          // Not the companion's seal before the target's first own lock: that one is not the lock.
          if (this.lose === 'first' && args[1].SecretString?.includes(SEALED.rotationId) !== true)
            throw this.#lost(args[1].Name);
          return answer;
        }

        override async putSecretValue(
          ...args: Parameters<SecretsManagerCalls['putSecretValue']>
        ): ReturnType<SecretsManagerCalls['putSecretValue']> {
          const answer = await super.putSecretValue(...args);
          if (this.lose === 'first' && args[1].VersionStages?.includes(LOCK_STAGE) === true)
            throw this.#lost(args[1].SecretId);
          return answer;
        }

        override async moveStage(
          ...args: Parameters<SecretsManagerCalls['moveStage']>
        ): Promise<'moved' | 'stale'> {
          const answer = await super.moveStage(...args);
          if (this.lose === 'move') throw this.#lost(args[1]);
          return answer;
        }

        override async getSecretValue(
          ...args: Parameters<SecretsManagerCalls['getSecretValue']>
        ): ReturnType<SecretsManagerCalls['getSecretValue']> {
          if (this.lose === undefined && this.failReads > 0) {
            this.failReads -= 1;
            throw new BackendError('KR_BACKEND_UNAVAILABLE', 'lossy: read refused', {
              backend: 'lossy',
              kind: 'aws',
              operation: 'lock',
              path: args[1].SecretId,
            });
          }
          return super.getSecretValue(...args);
        }
      }
      const clock = createTestClock();
      const context = (calls: SecretsManagerCalls) => ({
        calls,
        backendName: 'lossy',
        tags: {},
        now: clock.now,
      });
      const request = (owner: string) => ({ owner, rotationId: `rot-${owner}`, ttlMs: 900_000 });

      it('returns the lock as acquired when the first lock landed', async () => {
        const t = await target();
        const calls = new LostAnswerCalls('first');
        const other = makeBackend(server, clock);
        try {
          expect(
            await acquireLock(context(calls), t.path, request('a'), lockHints(sdk, t.path)),
          ).toMatchObject({ acquired: true, lock: { owner: 'a', tookOver: false } });
          expect((await other.acquireLock(t, request('b'))).acquired).toBe(false);
        } finally {
          await Promise.all([calls.close(), other.close()]);
        }
      });

      it('returns the lock as acquired when the compare-and-swap that took it landed', async () => {
        const t = await target();
        const first = makeBackend(server, clock);
        const calls = new LostAnswerCalls(undefined);
        try {
          const held = await first.acquireLock(t, request('old'));
          if (!held.acquired) throw new Error('expected the first lock');
          await first.releaseLock(t, held.lock);
          calls.lose = 'move';
          const outcome = await acquireLock(context(calls), t.path, request('a'), lockHints(sdk, t.path));
          expect(outcome).toMatchObject({ acquired: true, lock: { owner: 'a' } });
          expect((await first.readState(t)).lock?.owner).toBe('a');
        } finally {
          await Promise.all([first.close(), calls.close()]);
        }
      });

      it('gives the lock to a retried acquire when even the read-back failed', async () => {
        const t = await target();
        const calls = new LostAnswerCalls('first');
        calls.failReads = 1;
        try {
          const error = await rejection(
            acquireLock(context(calls), t.path, request('a'), lockHints(sdk, t.path)),
          );
          expect(error.code).toBe('KR_BACKEND_TIMEOUT');
          // The on-call retries at once with the same owner and rotation: not busy.
          expect(
            await acquireLock(context(calls), t.path, request('a'), lockHints(sdk, t.path)),
          ).toMatchObject({ acquired: true, lock: { owner: 'a' } });
        } finally {
          await calls.close();
        }
      });
    });
  });

  describe('a lock an operator broke', () => {
    it('in the companion, with a value keyroll did not write: says to write a released value, never to delete it', async () => {
      const t = newTarget();
      const backend = makeBackend(server, createTestClock());
      try {
        await backend.acquireLock(t, { owner: 'o', rotationId: 'r', ttlMs: 60_000 });
        await sdk.send(
          new PutSecretValueCommand({ SecretId: `${t.path}.keyroll-lock`, SecretString: 'not a lock' }),
        );
        const error = await rejection(
          backend.acquireLock(t, { owner: 'p', rotationId: 'r2', ttlMs: 60_000 }),
        );
        expect(error.code).toBe('KR_BACKEND_INVALID_RESPONSE');
        expect(error.message).toContain('"state":"released"');
        expect(error.message).toContain('never delete it');
        expect(error.message).not.toContain('not a lock');
        const description = await sdk.send(new DescribeSecretCommand({ SecretId: `${t.path}.keyroll-lock` }));
        expect(description.Description).toContain('Never delete it');
      } finally {
        await backend.close();
      }
    });

    it('on the secret, with a value keyroll did not write under its label: says how to put a released one there', async () => {
      const t = newTarget();
      const backend = makeBackend(server, createTestClock());
      try {
        await backend.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
        await backend.acquireLock(t, { owner: 'o', rotationId: 'r', ttlMs: 60_000 });
        await sdk.send(
          new PutSecretValueCommand({
            SecretId: t.path,
            SecretString: 'not a lock',
            VersionStages: [LOCK_STAGE],
          }),
        );
        const error = await rejection(
          backend.acquireLock(t, { owner: 'p', rotationId: 'r2', ttlMs: 60_000 }),
        );
        expect(error.code).toBe('KR_BACKEND_INVALID_RESPONSE');
        expect(error.message).toContain(`--version-stages ${LOCK_STAGE}`);
        expect(error.message).toContain('"state":"released"');
        expect(error.message).not.toContain('not a lock');
      } finally {
        await backend.close();
      }
    });

    // Issue 27 §5: before, every later lock of the key failed with "kept changing while keyroll
    // tried to take it" (the first lock's version id is taken, and no version carries the label).
    it('on the secret, with its KEYROLL_LOCK label removed by hand: says so and names the repair, the live holder loses its lock, the repair frees it', async () => {
      const t = newTarget();
      const clock = createTestClock();
      const holder = makeBackend(server, clock);
      const next = makeBackend(server, clock);
      try {
        await holder.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
        const held = await holder.acquireLock(t, { owner: 'o', rotationId: 'r', ttlMs: 60_000 });
        if (!held.acquired) throw new Error('the first lock was not taken');
        const stages =
          (await sdk.send(new DescribeSecretCommand({ SecretId: t.path }))).VersionIdsToStages ?? {};
        const labelled = Object.keys(stages).find((id) => stages[id]?.includes(LOCK_STAGE));
        await sdk.send(
          new UpdateSecretVersionStageCommand({
            SecretId: t.path,
            VersionStage: LOCK_STAGE,
            RemoveFromVersionId: labelled,
          }),
        );

        // Another runner, a leak rotation's included: no lock, and a message that says what happened.
        const error = await rejection(next.acquireLock(t, { owner: 'p', rotationId: 'r2', ttlMs: 60_000 }));
        expect(error.code).toBe('KR_BACKEND_INVALID_RESPONSE');
        expect(error.message).toContain(`label ${LOCK_STAGE} was removed`);
        expect(error.message).toContain(`--version-stages ${LOCK_STAGE}`);
        expect(error.message).not.toContain('kept changing');
        // The runner that held the lock cannot keep it (its refresh finds no label on its version): it stops.
        expect(await holder.refreshLock(t, held.lock, 60_000)).toBeUndefined();

        // The runbook's repair, once no runner holds the lock: a released value under the label.
        const released = {
          state: 'released',
          owner: 'operator',
          rotationId: 'manual-release',
          releasedAt: new Date().toISOString(),
        };
        await sdk.send(
          new PutSecretValueCommand({
            SecretId: t.path,
            SecretString: JSON.stringify(released),
            VersionStages: [LOCK_STAGE],
          }),
        );
        expect(await next.acquireLock(t, { owner: 'p', rotationId: 'r3', ttlMs: 60_000 })).toMatchObject({
          acquired: true,
          lock: { owner: 'p', tookOver: false },
        });
      } finally {
        await Promise.all([holder.close(), next.close()]);
      }
    });

    it('a companion scheduled for deletion fails the lock step with KR_BACKEND_SCHEDULED_FOR_DELETION naming restore-secret', async () => {
      const t = newTarget();
      const backend = makeBackend(server, createTestClock());
      const next = makeBackend(server, createTestClock());
      try {
        const held = await backend.acquireLock(t, { owner: 'o', rotationId: 'r', ttlMs: 60_000 });
        if (!held.acquired) throw new Error('expected the lock');
        await backend.releaseLock(t, held.lock);
        await sdk.send(
          new DeleteSecretCommand({ SecretId: `${t.path}.keyroll-lock`, RecoveryWindowInDays: 7 }),
        );
        // The next run meets the deletion. (The process that released the lock would go straight to
        // the CAS from the released value it wrote: AWS refuses that PutSecretValue on a deleted
        // secret, moto accepts it; test/backends/aws/errors.test.ts covers AWS's answer.)
        const error = await rejection(next.acquireLock(t, { owner: 'p', rotationId: 'r2', ttlMs: 60_000 }));
        expect(error).toMatchObject({
          code: 'KR_BACKEND_SCHEDULED_FOR_DELETION',
          operation: 'lock',
          retryable: false,
          path: `${t.path}.keyroll-lock`,
        });
        expect(error.message).toContain(`restore-secret --secret-id ${t.path}.keyroll-lock`);
        expect((await rejection(next.readState(t))).code).toBe('KR_BACKEND_SCHEDULED_FOR_DELETION');
      } finally {
        await Promise.all([backend.close(), next.close()]);
      }
    });
  });
});
