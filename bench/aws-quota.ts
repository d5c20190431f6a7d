// Benchmark 6: an emergency rotation of 1,000 existing AWS-stored keys at AWS's real quotas
// (issue 19). moto enforces no quota, so keyroll talks to moto through a proxy that enforces the
// documented quota groups per account and region (test/support/aws-quota-proxy.ts: writes 50/s,
// tags 50/s, reads 10,000/s, creates 50/s, each a bucket holding one second) and answers a
// request over them as AWS does (HTTP 400 ThrottlingException). Every secret exists before the
// run, with its key lock released on the secret itself (a version labelled KEYROLL_LOCK,
// src/backends/aws/lock/target.ts), as after an earlier rotation by this keyroll: the steady state
// of a fleet. (A fleet's first rotation after an upgrade from a keyroll that kept locks in
// `<name>.keyroll-lock` companions moves each lock onto its secret, once: 6 writes for that one;
// test/integration/aws-requests.test.ts pins both.) keyroll runs as the compiled CLI in a child process, as a leak-response Job would:
// `rotate --all --reason leak --concurrency 16`. The emulator allows 6,000 rolls a minute, so the
// write quota, not the API, bounds the run.
// The floor is what the write quota allows at best for the writes keyroll made: (write-group
// calls ÷ 50 per second); `aws.emergencyWallToQuotaFloor` is the wall time over it. `lost` counts
// rolled keys whose working secret is not the AWSCURRENT value (read by stage: moto does not move
// its default version with AWSCURRENT).
import {
  CreateSecretCommand,
  GetSecretValueCommand,
  PutSecretValueCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { FIRST_LOCK_TOKEN, LOCK_STAGE } from '../src/backends/aws/lock/target.ts';
import { startAwsQuotaProxy, AWS_QUOTAS } from '../test/support/aws-quota-proxy.ts';
import { jsonReport, runCli } from './lib/cli.ts';
import type { BenchResult } from './lib/figures.ts';
import { MOTO_ENV, serverBinDir, startMoto } from './lib/servers.ts';
import { round } from './lib/stats.ts';
import { ORG, OWNER_TOKEN, startWorld, type World } from './lib/world.ts';

export const AWS_QUOTA_KEYS = 1_000;
/** The concurrency docs/runbook.md recommends for an emergency over AWS destinations. */
export const AWS_QUOTA_CONCURRENCY = 16;
const API_RATE_PER_MINUTE = 6_000;
const TIME_LIMIT_MS = 600_000;
const SEED_CONCURRENCY = 16;

async function inBatches<T>(
  items: readonly T[],
  size: number,
  task: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: size }, async () => {
      while (next < items.length) {
        const item = items[next++] as T;
        await task(item);
      }
    }),
  );
}

/** `count` API keys, each stored as after an earlier rotation: its working secret (JSON shape) and a released lock on it. */
async function seedExistingSecrets(
  sdk: SecretsManagerClient,
  world: World,
  count: number,
  pathOf: (id: string) => string,
): Promise<string[]> {
  const releasedAt = new Date().toISOString();
  const width = String(count - 1).length;
  const keys = Array.from({ length: count }, (_, index) => {
    const id = `key_aws_leak_${String(index).padStart(width, '0')}`;
    return { id, secret: world.emulator.state.addApiKey({ id, name: id, organizationId: ORG }).secret };
  });
  await inBatches(keys, SEED_CONCURRENCY, async ({ id, secret }) => {
    const value = JSON.stringify({ apiKey: secret, keyId: id, organizationId: ORG, rotatedAt: releasedAt });
    await sdk.send(
      new CreateSecretCommand({
        Name: pathOf(id),
        SecretString: value,
        Tags: [{ Key: 'managed-by', Value: 'keyroll' }],
      }),
    );
    const released = JSON.stringify({
      state: 'released',
      owner: 'bench-seed',
      rotationId: `seed-${id}`,
      releasedAt,
    });
    await sdk.send(
      new PutSecretValueCommand({
        SecretId: pathOf(id),
        SecretString: released,
        ClientRequestToken: FIRST_LOCK_TOKEN,
        VersionStages: [LOCK_STAGE],
      }),
    );
  });
  return keys.map((key) => key.id);
}

/** Rolled keys whose working secret is not the AWSCURRENT value. */
async function countLost(
  sdk: SecretsManagerClient,
  world: World,
  keyIds: readonly string[],
  pathOf: (id: string) => string,
): Promise<number> {
  let lost = 0;
  await inBatches(keyIds, SEED_CONCURRENCY, async (id) => {
    if (world.emulator.state.rollCount(id) === 0) return;
    let stored: string | undefined;
    try {
      // By stage, always: moto's unlabelled default does not follow AWSCURRENT.
      const answer = await sdk.send(
        new GetSecretValueCommand({ SecretId: pathOf(id), VersionStage: 'AWSCURRENT' }),
      );
      stored = (JSON.parse(answer.SecretString ?? '{}') as { apiKey?: string }).apiKey;
    } catch {
      stored = undefined;
    }
    if (stored === undefined || !world.emulator.state.isLiveSecret(id, stored)) lost++;
  });
  return lost;
}

export async function runAwsQuotaBench(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const count = options.quick ? 200 : AWS_QUOTA_KEYS;
  const moto = await startMoto(serverBinDir());
  const world = await startWorld({ rollRateLimitPerMinute: API_RATE_PER_MINUTE, rollRateBurstSeconds: 1 });
  const proxy = await startAwsQuotaProxy({ upstream: moto.url });
  const sdk = new SecretsManagerClient({
    endpoint: moto.url,
    region: MOTO_ENV.AWS_REGION,
    credentials: { accessKeyId: MOTO_ENV.AWS_ACCESS_KEY_ID, secretAccessKey: MOTO_ENV.AWS_SECRET_ACCESS_KEY },
  });
  try {
    const pathOf = (id: string): string => `bench/quota/${id}`;
    const seedStarted = performance.now();
    const keyIds = await seedExistingSecrets(sdk, world, count, pathOf);
    const seedMs = performance.now() - seedStarted;
    const policy = await world.writePolicy('aws-quota.yaml', {
      rateLimitPerMinute: API_RATE_PER_MINUTE,
      backends: `  aws: { kind: aws, endpoint: "${proxy.url}", region: ${MOTO_ENV.AWS_REGION} }`,
      keys: keyIds.map((id) => ({ id, backend: 'aws', path: pathOf(id) })),
    });
    proxy.resetCounts();
    const run = await runCli(
      [
        'rotate',
        '--all',
        '--reason',
        'leak',
        '--actor',
        'bench',
        '--policy',
        policy,
        '--concurrency',
        String(AWS_QUOTA_CONCURRENCY),
        '-o',
        'json',
      ],
      {
        cwd: world.dir,
        env: { KEYROLL_API_TOKEN: OWNER_TOKEN, ...MOTO_ENV },
        timeoutMs: TIME_LIMIT_MS,
      },
    );
    const report = jsonReport(run.stdout);
    const byGroup = proxy.forwardedByGroup();
    const throttledByGroup = proxy.throttledByGroup();
    const throttled = Object.values(throttledByGroup).reduce((sum, n) => sum + n, 0);
    // Refused calls count against nothing at AWS's side here, and keyroll sent them again: the
    // writes made are the ones that went through.
    const floorMs = (byGroup.write / AWS_QUOTAS.write) * 1000;
    const rotated = Math.max(1, report.rotated);
    const lost = await countLost(sdk, world, keyIds, pathOf);
    const failedCodes: Record<string, number> = {};
    for (const key of report.keys)
      if (key.result === 'failed')
        failedCodes[key.errorCode ?? 'unknown'] = (failedCodes[key.errorCode ?? 'unknown'] ?? 0) + 1;
    const wallToFloor = round(run.wallMs / floorMs, 3);
    return {
      figures: [
        { name: 'aws.emergencyFailed', value: report.failed, unit: 'keys', goal: { op: '==', target: 0 } },
        {
          name: 'aws.emergencyWallToQuotaFloor',
          value: wallToFloor,
          unit: '×',
          goal: { op: '<=', target: 1.15 },
        },
        {
          name: 'aws.writesPerRotation',
          value: round(byGroup.write / rotated, 2),
          unit: '',
          goal: { op: '<=', target: 4 },
        },
        { name: 'aws.tagsPerRotation', value: round(byGroup.tag / rotated, 2), unit: '' },
        { name: 'aws.throttledCalls', value: throttled, unit: '' },
        { name: 'aws.lost', value: lost, unit: 'keys', goal: { op: '==', target: 0 } },
        { name: 'aws.emergencyWallMs', value: Math.round(run.wallMs), unit: 'ms' },
      ],
      details: {
        keys: count,
        rotated: report.rotated,
        failed: report.failed,
        failedByCode: failedCodes,
        exitCode: run.code,
        wallMs: round(run.wallMs, 1),
        floorMs: round(floorMs, 1),
        requestsByAction: proxy.forwarded(),
        requestsByGroup: byGroup,
        throttledByGroup,
        requestsPerRotation: round(Object.values(byGroup).reduce((sum, n) => sum + n, 0) / rotated, 2),
        concurrency: AWS_QUOTA_CONCURRENCY,
        quotasPerSecond: AWS_QUOTAS,
        quotaProxy:
          'a token bucket per group holding one second of its rate; HTTP 400 ThrottlingException (x-amzn-ErrorType and __type) over it',
        apiRollsPerMinute: API_RATE_PER_MINUTE,
        seedMs: round(seedMs, 1),
        wall: 'spawn of `node dist/cli/entry.js rotate --all --reason leak` to its exit',
      },
      notes: [
        `aws-quota: ${String(count)} existing AWS secrets (moto behind a proxy enforcing the documented quotas: writes 50/s, tags 50/s, reads 10,000/s), rotate --all --reason leak --concurrency ${String(AWS_QUOTA_CONCURRENCY)}; floor = write-group calls ÷ 50/s = ${String(round(floorMs / 1000, 1))} s; API at ${String(API_RATE_PER_MINUTE)} rolls/min`,
      ],
    };
  } finally {
    sdk.destroy();
    await proxy.close();
    await world.close();
    await moto.stop();
  }
}
