// The AWS Secrets Manager backend against a real moto server: the shared backend contract,
// then what only AWS has (staging labels, ClientRequestToken idempotency, creation options,
// tags, transport failures) and the rotation engine end to end. Lock contention: aws-lock.test.ts;
// the shipped IAM policy: aws-iam.test.ts.
import { createServer, type Server, type Socket } from 'node:net';
import { randomUUID } from 'node:crypto';
import {
  DescribeSecretCommand,
  ListSecretVersionIdsCommand,
  type SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AwsBackendConfig } from '../../src/backends/aws/config.ts';
import type { Backend } from '../../src/backends/types.ts';
import { createTestClock, describeBackendContract, makeRecord } from '../backends/contract.ts';
import { JSON_SHAPE, keyPolicy, startBench } from '../rotation/harness.ts';
import { makeBackend, motoEnv, newTarget, rejection, run, sdkClient } from './aws-fixtures.ts';
import { describeWithMoto } from '../support/moto.ts';

describeWithMoto('aws backend (moto)', ({ server }) => {
  describeBackendContract('aws (moto)', () => {
    const clock = createTestClock();
    return Promise.resolve({
      backend: makeBackend(server, clock),
      newTarget,
      clock,
      // Another process: its own client, lock sightings and facts, the same moto and clock.
      otherRunner: () => Promise.resolve(makeBackend(server, clock)),
      // A well-formed ARN of a secret that does not exist: the write reaches AWS and fails there.
      failingTarget: () => ({
        path: `arn:aws:secretsmanager:${server.region}:123456789012:secret:keyroll-test/${run}/missing-AbCdEf`,
        shape: { format: 'raw', secretField: 'apiKey', fields: [] },
      }),
      cleanup: () => Promise.resolve(),
    });
  });

  describe('AWS specifics', () => {
    const clock = createTestClock();
    let backend: Backend;
    let sdk: SecretsManagerClient;

    beforeAll(() => {
      backend = makeBackend(server, clock, {
        kmsKeyId: 'alias/keyroll-test',
        tags: { team: 'platform', 'managed-by': 'someone-else' },
      });
      sdk = sdkClient(server);
    });
    afterAll(async () => {
      await backend.close();
      sdk.destroy();
    });

    it('makes each new rotation AWSCURRENT and the one before AWSPREVIOUS', async () => {
      const t = newTarget();
      const first = await backend.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
      const second = await backend.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
      const versions = await sdk.send(new ListSecretVersionIdsCommand({ SecretId: t.path }));
      const stages: Record<string, string[] | undefined> = {};
      for (const v of versions.Versions ?? []) stages[v.VersionId ?? ''] = v.VersionStages;
      expect(stages).toEqual({ [first.version]: ['AWSPREVIOUS'], [second.version]: ['AWSCURRENT'] });
    });

    it('uses the rotation id as ClientRequestToken, so a retried write adds no version', async () => {
      const t = newTarget();
      const record = makeRecord({ rotationId: randomUUID() });
      const first = await backend.writeSecret(t, record);
      const retry = await backend.writeSecret(t, record);
      expect(first).toEqual({ version: record.rotationId, alreadyApplied: false });
      expect(retry).toEqual({ version: record.rotationId, alreadyApplied: true });
      const versions = await sdk.send(new ListSecretVersionIdsCommand({ SecretId: t.path }));
      expect(versions.Versions?.map((v) => v.VersionId)).toEqual([record.rotationId]);
    });

    it('refuses a second write of the same rotation with a different secret', async () => {
      const t = newTarget();
      const rotationId = randomUUID();
      await backend.writeSecret(t, makeRecord({ rotationId }));
      // The same process checks the existing version first; another process learns it from AWS.
      expect((await rejection(backend.writeSecret(t, makeRecord({ rotationId })))).code).toBe(
        'KR_BACKEND_CONFLICT',
      );
      const other = makeBackend(server, clock);
      try {
        expect((await rejection(other.writeSecret(t, makeRecord({ rotationId })))).code).toBe(
          'KR_BACKEND_CONFLICT',
        );
      } finally {
        await other.close();
      }
    });

    it('creates a missing secret with the KMS key and the managed-by=keyroll tag', async () => {
      const t = newTarget();
      await backend.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
      const description = await sdk.send(new DescribeSecretCommand({ SecretId: t.path }));
      expect(description.KmsKeyId).toBe('alias/keyroll-test');
      expect(description.Tags).toEqual(
        expect.arrayContaining([
          { Key: 'managed-by', Value: 'keyroll' },
          { Key: 'team', Value: 'platform' },
        ]),
      );
    });

    it('with createIfMissing off, fails preflight and write on a missing secret and creates nothing', async () => {
      const strict = makeBackend(server, clock, { createIfMissing: false });
      const t = newTarget();
      try {
        expect((await rejection(strict.preflight(t))).code).toBe('KR_BACKEND_NOT_FOUND');
        expect((await rejection(strict.writeSecret(t, makeRecord()))).code).toBe('KR_BACKEND_NOT_FOUND');
        expect(
          (
            await rejection(
              strict.setIntent(t, {
                rotationId: 'r',
                keyId: 'k',
                owner: 'o',
                startedAt: clock.now().toISOString(),
              }),
            )
          ).code,
        ).toBe('KR_BACKEND_NOT_FOUND');
        expect(await strict.readState(t)).toEqual({ exists: false });
      } finally {
        await strict.close();
      }
    });

    it('writes to and locks an existing secret addressed by its ARN', async () => {
      const t = newTarget();
      await backend.writeSecret(t, makeRecord());
      const { ARN } = await sdk.send(new DescribeSecretCommand({ SecretId: t.path }));
      const byArn = { ...t, path: ARN! };
      const record = makeRecord({ rotationId: randomUUID() });
      await backend.writeSecret(byArn, record);
      expect((await backend.readSecret(t))?.secret.equals(record.secret)).toBe(true);
      expect(
        (
          await backend.acquireLock(byArn, {
            owner: 'arn-owner',
            rotationId: record.rotationId,
            ttlMs: 60_000,
          })
        ).acquired,
      ).toBe(true);
      expect((await backend.readState(t)).lock?.owner).toBe('arn-owner');
    });

    it('keeps the lock in a companion secret <name>.keyroll-lock tagged managed-by=keyroll', async () => {
      const t = newTarget();
      await backend.acquireLock(t, { owner: 'o', rotationId: 'r', ttlMs: 60_000 });
      const description = await sdk.send(new DescribeSecretCommand({ SecretId: `${t.path}.keyroll-lock` }));
      expect(description.Tags).toEqual(expect.arrayContaining([{ Key: 'managed-by', Value: 'keyroll' }]));
    });

    it('round-trips intent fields that tag values cannot hold as they are', async () => {
      const t = newTarget();
      const intent = {
        rotationId: randomUUID(),
        keyId: 'key with spaces|pipes {json} @at',
        owner: 'hôte/123/ünïcode',
        startedAt: clock.now().toISOString(),
      };
      await backend.setIntent(t, intent);
      expect((await backend.readState(t)).intent).toEqual(intent);
      const tags = (await sdk.send(new DescribeSecretCommand({ SecretId: t.path }))).Tags ?? [];
      const value = tags.find((tag) => tag.Key === 'keyroll:intent')?.Value ?? '';
      expect(value).toMatch(/^[A-Za-z0-9 _.:/=+@-]{1,256}$/);
    });

    it('keeps the key id and the drift probe in portable tags, each record replacing only its own', async () => {
      const t = newTarget();
      const written = await backend.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
      const rotation = {
        rotationId: randomUUID(),
        rotatedAt: clock.now().toISOString(),
        version: written.version,
      };
      await backend.recordRotation(t, { ...rotation, keyId: 'key slot|ä/@b' });
      await backend.recordProbe(t, { at: '2030-01-01T01:00:00.000Z', result: 'dead' });
      expect(await backend.readState(t)).toMatchObject({
        lastKeyId: 'key slot|ä/@b',
        lastProbe: { at: '2030-01-01T01:00:00.000Z', result: 'dead' },
      });
      const tags = (await sdk.send(new DescribeSecretCommand({ SecretId: t.path }))).Tags ?? [];
      for (const key of ['keyroll:last-key-id', 'keyroll:last-probe']) {
        expect(tags.find((tag) => tag.Key === key)?.Value).toMatch(/^[A-Za-z0-9 _.:/=+@-]{1,256}$/);
      }
      // A record without a key id leaves no stale active slot behind; the probe is not the record's.
      await backend.recordRotation(t, rotation);
      const state = await backend.readState(t);
      expect(state).not.toHaveProperty('lastKeyId');
      expect(state.lastProbe).toEqual({ at: '2030-01-01T01:00:00.000Z', result: 'dead' });
    });

    it('records a drift probe only on a secret that exists: it never creates one to hold the record', async () => {
      const t = newTarget();
      expect(
        (await rejection(backend.recordProbe(t, { at: clock.now().toISOString(), result: 'works' }))).code,
      ).toBe('KR_BACKEND_NOT_FOUND');
      expect(await backend.readState(t)).toEqual({ exists: false });
      expect(await backend.readPrevious?.(t)).toBeUndefined();
    });

    it('preflight proves the write without adding a version and says what it proved', async () => {
      const t = newTarget();
      const written = await backend.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
      const result = await backend.preflight(t);
      expect(result.checks.join('\n')).toMatch(/PutSecretValue allowed/);
      const versions = await sdk.send(new ListSecretVersionIdsCommand({ SecretId: t.path }));
      expect(versions.Versions?.map((v) => v.VersionId)).toEqual([written.version]);
    });

    it('preflight on a secret created empty by the intent marker reports exists: false', async () => {
      const t = newTarget();
      await backend.setIntent(t, {
        rotationId: randomUUID(),
        keyId: 'k',
        owner: 'o',
        startedAt: clock.now().toISOString(),
      });
      expect((await backend.preflight(t)).exists).toBe(false);
      expect(await backend.readSecret(t)).toBeUndefined();
    });

    it('rejects a target that is not a secret name or ARN before calling AWS', async () => {
      const error = await rejection(backend.preflight({ path: 'bad name!', shape: newTarget().shape }));
      expect(error.code).toBe('KR_BACKEND_INVALID_TARGET');
    });
  });

  describe('rotation engine end to end', () => {
    it('rotates a key into Secrets Manager twice: AWSCURRENT works, bookkeeping recorded, lock released', async () => {
      const path = `keyroll-test/${run}/e2e/billing`;
      const bench = await startBench({
        keys: (org) => [
          keyPolicy('key_demo_billing', org('key_demo_billing'), {
            destinations: [{ backend: 'aws', target: { path, shape: JSON_SHAPE } }],
          }),
        ],
        policy: {
          backends: {
            aws: AwsBackendConfig.parse({ kind: 'aws', endpoint: server.endpoint, createIfMissing: true }),
          },
        },
      });
      const sdk = sdkClient(server);
      const observer = makeBackend(server, createTestClock());
      const env = motoEnv(server);
      try {
        // Each run verifies by reading back and calling the API with the stored key.
        const first = await bench.run({ runtime: { env }, trigger: { force: true } });
        const second = await bench.run({ runtime: { env }, trigger: { force: true } });
        expect([first.rotated, second.rotated]).toEqual([1, 1]);
        const [v1, v2] = [first, second].map((summary) => summary.outcomes[0]?.versions?.[0]?.version);
        expect(v2).toBe(second.outcomes[0]?.rotationId);
        const description = await sdk.send(new DescribeSecretCommand({ SecretId: path }));
        // The fenced write moved AWSCURRENT onto its KEYROLL_PENDING version (aws-fence.test.ts); the label stays until the next write.
        // The second rotation took the key lock on the secret itself: a version labelled KEYROLL_LOCK
        // (lock/target.ts) that carries neither AWSCURRENT nor AWSPREVIOUS, so no consumer reads it.
        const { [v1!]: previous, [v2!]: current, ...lockVersions } = description.VersionIdsToStages ?? {};
        expect({ previous, current: [...(current ?? [])].sort() }).toEqual({
          previous: ['AWSPREVIOUS'],
          current: ['AWSCURRENT', 'KEYROLL_PENDING'],
        });
        expect(Object.values(lockVersions).flat()).toContain('KEYROLL_LOCK');
        expect(
          Object.values(lockVersions)
            .flat()
            .filter((label) => label.startsWith('AWS')),
        ).toEqual([]);
        const tags = new Map((description.Tags ?? []).map((tag) => [tag.Key, tag.Value]));
        expect(tags.get('keyroll:last-rotation-id')).toBe(second.outcomes[0]?.rotationId);
        // The finish step clears the marker in its one TagResource by overwriting it with the empty value.
        expect(tags.get('keyroll:intent') ?? '').toBe('');
        const state = await observer.readState({ path, shape: JSON_SHAPE });
        expect(state.intent).toBeUndefined();
        expect(state.lock).toBeUndefined();
      } finally {
        await observer.close();
        sdk.destroy();
        await bench.close();
      }
    });
  });

  describe('transport failures', () => {
    const clock = createTestClock();

    it('maps a closed port to a retryable KR_BACKEND_UNAVAILABLE', async () => {
      const port = await closedPort();
      const down = makeBackend({ ...server, endpoint: `http://127.0.0.1:${String(port)}` }, clock);
      try {
        const error = await rejection(down.preflight(newTarget()));
        expect(error).toMatchObject({
          code: 'KR_BACKEND_UNAVAILABLE',
          retryable: true,
          operation: 'preflight',
          kind: 'aws',
        });
      } finally {
        await down.close();
      }
    });

    it('maps a server that never answers to a retryable KR_BACKEND_TIMEOUT after timeoutMs', async () => {
      const silent = await silentServer();
      const slow = makeBackend({ ...server, endpoint: silent.url }, clock, { timeoutMs: 200 });
      try {
        const error = await rejection(slow.readState(newTarget()));
        expect(error).toMatchObject({ code: 'KR_BACKEND_TIMEOUT', retryable: true });
      } finally {
        await slow.close();
        await silent.close();
      }
    });
  });
});

async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const address = probe.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  await new Promise<void>((resolve) => {
    probe.close(() => {
      resolve();
    });
  });
  return port;
}

/** A loopback server that accepts connections and never answers. */
async function silentServer(): Promise<{ url: string; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const silent: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const address = silent.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    url: `http://127.0.0.1:${String(port)}`,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => {
        silent.close(() => {
          resolve();
        });
      });
    },
  };
}
