// The commands against AWS Secrets Manager (moto): `validate`, `run`, `status`, `plan`,
// `rotate --reason leak` (AWSCURRENT/AWSPREVIOUS), and the runbook's way of releasing a lock
// companion left by a dead runner. The CLI runs as a child process with moto's credentials in
// its environment (the default AWS chain); the emulator runs in this process.
import { randomUUID } from 'node:crypto';
import {
  DescribeSecretCommand,
  GetSecretValueCommand,
  PutSecretValueCommand,
  UpdateSecretVersionStageCommand,
  type SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { afterEach, describe, expect, it } from 'vitest';
import { eventsNamed, ORG, useCliFixture, type CliFixture, type CliResult } from '../cli/harness.ts';
import { motoEnv, sdkClient } from './aws-fixtures.ts';
import { motoServer, type MotoServer } from './servers.ts';

const cli = useCliFixture();
const KEYS = { key_demo_billing: 'billing', key_demo_search: 'search', key_demo_ingest: 'ingest' } as const;
type KeyId = keyof typeof KEYS;

let sdk: SecretsManagerClient | undefined;
afterEach(() => {
  sdk?.destroy();
  sdk = undefined;
});

interface AwsSetup {
  sdk: SecretsManagerClient;
  nameOf(keyId: KeyId): string;
  run(args: readonly string[]): Promise<CliResult>;
  current(keyId: KeyId, stage?: 'AWSCURRENT' | 'AWSPREVIOUS'): Promise<{ apiKey: string; versionId: string }>;
}

async function setUpAws(fixture: CliFixture, server: MotoServer): Promise<AwsSetup> {
  const prefix = `keyroll-cli/${randomUUID().slice(0, 8)}`;
  const nameOf = (keyId: KeyId): string => `${prefix}/${KEYS[keyId]}`;
  const keys = (Object.keys(KEYS) as KeyId[])
    .map(
      (id) =>
        `  - id: ${id}\n    organization: ${ORG}\n    destinations: [{ backend: aws, path: ${nameOf(id)} }]\n`,
    )
    .join('');
  await fixture.writeFile(
    'policy.yaml',
    `version: 1
api:
  baseUrl: ${fixture.emulator.url}
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
backends:
  aws: { kind: aws, endpoint: "${server.endpoint}", region: ${server.region}, createIfMissing: true, timeoutMs: 5000 }
defaults:
  schedule: "0 3 * * 1"
  minInterval: 1h
keys:
${keys}`,
  );
  sdk = sdkClient(server);
  const client = sdk;
  return {
    sdk: client,
    nameOf,
    run: (args) => fixture.run(args, { env: { ...motoEnv(server) } }),
    current: async (keyId, stage = 'AWSCURRENT') => {
      const answer = await client.send(
        new GetSecretValueCommand({ SecretId: nameOf(keyId), VersionStage: stage }),
      );
      return {
        apiKey: (JSON.parse(answer.SecretString ?? '{}') as { apiKey: string }).apiKey,
        versionId: answer.VersionId ?? '',
      };
    },
  };
}

/**
 * Makes `value` the AWSCURRENT value of `secretId`. On AWS `put-secret-value` alone does this; moto
 * leaves AWSCURRENT on a version that UpdateSecretVersionStage moved it to, so the test takes the
 * explicit route: put the version under a label of its own, then move AWSCURRENT onto it.
 */
async function putAsCurrent(sdk: SecretsManagerClient, secretId: string, value: unknown): Promise<void> {
  const put = await sdk.send(
    new PutSecretValueCommand({
      SecretId: secretId,
      SecretString: JSON.stringify(value),
      VersionStages: ['OPERATOR_EDIT'],
    }),
  );
  const stages = (await sdk.send(new DescribeSecretCommand({ SecretId: secretId }))).VersionIdsToStages ?? {};
  const current = Object.entries(stages).find(([, labels]) => labels.includes('AWSCURRENT'))?.[0];
  await sdk.send(
    new UpdateSecretVersionStageCommand({
      SecretId: secretId,
      VersionStage: 'AWSCURRENT',
      MoveToVersionId: put.VersionId,
      RemoveFromVersionId: current,
    }),
  );
}

describe('the commands against AWS Secrets Manager (moto)', () => {
  it('validate passes for secrets createIfMissing will create (exit 0) and creates none', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const aws = await setUpAws(cli, server);
    const result = await aws.run(['validate', '-p', 'policy.yaml']);
    expect(result.code).toBe(0);
    for (const id of Object.keys(KEYS) as KeyId[]) {
      expect(result.stdout).toMatch(
        new RegExp(`^ok\\s+destination aws:${aws.nameOf(id)} — ${id}: will be created`, 'm'),
      );
      await expect(
        aws.sdk.send(new DescribeSecretCommand({ SecretId: aws.nameOf(id) })),
      ).rejects.toMatchObject({ name: 'ResourceNotFoundException' });
    }
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });

  it('run makes the live secret AWSCURRENT, status -o json matches the audit trail, and plan afterwards changes nothing', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const aws = await setUpAws(cli, server);
    const run = await aws.run(['run', '-p', 'policy.yaml']);
    expect(run.code).toBe(0);
    expect(run.lastLine).toBe('rotated 3, failed 0, skipped 0');
    for (const id of Object.keys(KEYS) as KeyId[]) {
      const current = await aws.current(id);
      expect(cli.emulator.state.isLiveSecret(id, current.apiKey)).toBe(true);
      // ClientRequestToken = rotation id, so the version id is the audited rotation id.
      expect(current.versionId).toBe(
        eventsNamed(run, 'key.succeeded').find((e) => e.keyId === id)?.rotationId,
      );
    }

    const status = await aws.run(['status', '-p', 'policy.yaml', '-o', 'json']);
    expect(status.code).toBe(0);
    for (const key of (
      JSON.parse(status.stdout) as {
        keys: { keyId: KeyId; lastRotationId: string; due: boolean; lock: unknown; intent: unknown }[];
      }
    ).keys) {
      expect(key.lastRotationId).toBe((await aws.current(key.keyId)).versionId);
      expect(key).toMatchObject({ due: false, lock: null, intent: null });
    }

    const rolls = cli.emulator.state.totalRolls();
    const describe = async (): Promise<unknown[]> =>
      Promise.all(
        (Object.keys(KEYS) as KeyId[]).map(
          async (id) =>
            (await aws.sdk.send(new DescribeSecretCommand({ SecretId: aws.nameOf(id) }))).VersionIdsToStages,
        ),
      );
    const stagesBefore = await describe();
    const plan = await aws.run(['plan', '-p', 'policy.yaml', '-o', 'json']);
    expect(plan.code).toBe(0);
    expect((JSON.parse(plan.stdout) as { keys: { due: boolean }[] }).keys.map((k) => k.due)).toEqual([
      false,
      false,
      false,
    ]);
    expect(cli.emulator.state.totalRolls()).toBe(rolls);
    expect(await describe()).toEqual(stagesBefore);
  });

  it('rotate --reason leak moves the new secret to AWSCURRENT and the dead one to AWSPREVIOUS', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const aws = await setUpAws(cli, server);
    expect((await aws.run(['run', '-p', 'policy.yaml'])).code).toBe(0);
    const first = await aws.current('key_demo_search');
    const leak = await aws.run([
      'rotate',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_search',
      '--reason',
      'leak',
      '--actor',
      'alice',
      '--ticket',
      'INC-2',
    ]);
    expect(leak.code).toBe(0);
    expect(leak.lastLine).toBe('rotated 1, failed 0, skipped 0');
    const current = await aws.current('key_demo_search');
    const previous = await aws.current('key_demo_search', 'AWSPREVIOUS');
    expect(previous).toEqual(first);
    expect(cli.emulator.state.isLiveSecret('key_demo_search', current.apiKey)).toBe(true);
    expect(cli.emulator.state.isLiveSecret('key_demo_search', previous.apiKey)).toBe(false);
    expect(eventsNamed(leak, 'key.succeeded')).toEqual([
      expect.objectContaining({
        rotationId: current.versionId,
        actor: 'alice',
        reason: 'leak',
        ticket: 'INC-2',
      }),
    ]);
  });

  it('a lock companion left held by a dead runner makes rotate exit 3 until it is released as the runbook says', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const aws = await setUpAws(cli, server);
    // A first rotation creates the lock companion; then a "dead runner" holds it far into the future.
    expect((await aws.run(['run', '-p', 'policy.yaml'])).code).toBe(0);
    const lockName = `${aws.nameOf('key_demo_ingest')}.keyroll-lock`;
    await putAsCurrent(aws.sdk, lockName, {
      state: 'held',
      owner: 'dead-host/1/gone',
      rotationId: 'r-dead',
      expiresAt: '2099-01-01T00:00:00.000Z',
    });

    const busy = await aws.run([
      'rotate',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_ingest',
      '--reason',
      'leak',
      '--actor',
      'alice',
    ]);
    expect(busy.code).toBe(3);
    expect(eventsNamed(busy, 'key.lock.busy')).toEqual([
      expect.objectContaining({ holder: 'dead-host/1/gone' }),
    ]);

    // docs/runbook.md: aws secretsmanager put-secret-value --secret-id <name>.keyroll-lock --secret-string '{"state":"released",…}'
    await putAsCurrent(aws.sdk, lockName, {
      state: 'released',
      owner: 'operator:alice',
      rotationId: 'manual-release',
      releasedAt: new Date().toISOString(),
    });
    const freed = await aws.run([
      'rotate',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_ingest',
      '--reason',
      'leak',
      '--actor',
      'alice',
    ]);
    expect(freed.code).toBe(0);
    expect(
      cli.emulator.state.isLiveSecret('key_demo_ingest', (await aws.current('key_demo_ingest')).apiKey),
    ).toBe(true);
  });
});
