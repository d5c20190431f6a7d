// Issue 18 §3 against the real servers: whoever may only tag a secret (AWS TagResource, moto) or
// write its metadata (Vault, OpenBao) forges the failure record of a key 90 days overdue. Before,
// the key was skipped as quarantined with 0 alerts, or never reminded about; now it is rotated, or
// alerted at once, and the forged fields are audited (key.record.distrusted).
// The file backend's cases: test/rotation/forged-records.test.ts.
import { randomUUID } from 'node:crypto';
import { TagResourceCommand } from '@aws-sdk/client-secrets-manager';
import { describe, expect, it } from 'vitest';
import { emulatorApi, useEmulator } from '../support/emulator.ts';
import { staticCredential } from '../../src/api/credentials.ts';
import { createAuditLog, type AuditRecord } from '../../src/audit/logger.ts';
import { Secret } from '../../src/audit/secret.ts';
import type { BackendConfig } from '../../src/backends/config.ts';
import type { FailureSettings, Policy } from '../../src/policy/schema.ts';
import { createRuntime } from '../../src/rotation/runtime.ts';
import { runRotations, type RunSummary } from '../../src/rotation/run.ts';
import { RecordingAlerter, keyPolicy } from '../rotation/harness.ts';
import { motoEnv, sdkClient } from './aws-fixtures.ts';
import { motoServer, vaultServer, type MotoServer, type VaultServer } from './servers.ts';
import { vaultAdmin } from './vault-admin.ts';

const KEY = 'key_demo_billing';
const HOUR = 3600_000;
const DAY = 24 * HOUR;
const FAILURES: FailureSettings = {
  backoffInitialMs: HOUR,
  backoffCapMs: DAY,
  jitter: 0,
  quarantineAfter: 5,
  remindEveryMs: DAY,
};
const ago = (ms: number): string => new Date(Date.now() - ms).toISOString();

const emulator = useEmulator();

interface Forgery {
  lastRotatedAt: string;
  failure: {
    rotationId: string;
    step: string;
    errorCode: string;
    at: string;
    consecutive: number;
    firstAt: string;
    quarantinedAt: string;
    lastAlertedAt: string;
  };
}

/** What the attacker writes: a key last rotated 90 days ago (maxAge 30 days), quarantined. */
const forgery = (times: { quarantinedAt: string; lastAlertedAt: string }): Forgery => ({
  lastRotatedAt: ago(90 * DAY),
  failure: {
    rotationId: 'forged',
    step: 'preflight',
    errorCode: 'KR_BACKEND_DENIED',
    at: ago(DAY),
    consecutive: 7,
    firstAt: ago(10 * DAY),
    ...times,
  },
});

/** Rotates the key once into `backend`, lets `forge` change its bookkeeping, then runs as the CronJob would. */
async function forgedRun(
  backend: BackendConfig,
  path: string,
  env: NodeJS.ProcessEnv,
  forge: () => Promise<void>,
) {
  const lines: string[] = [];
  const audit = createAuditLog({ destination: { write: (line: string) => void lines.push(line) } });
  const key = keyPolicy(KEY, emulator.state.apiKey(KEY).organizationId, {
    destinations: [
      {
        backend: 'real',
        target: { path, shape: { format: 'json', secretField: 'apiKey', fields: ['keyId'] } },
      },
    ],
    failures: FAILURES,
  });
  const policy: Policy = {
    file: 'forged.yaml',
    api: emulatorApi(emulator.url),
    backends: { real: backend },
    alerts: { sinks: {} },
    keys: [key],
  };
  const alerter = new RecordingAlerter();
  const run = async (): Promise<RunSummary> => {
    const runtime = await createRuntime(policy, {
      audit,
      alerter,
      credentials: staticCredential(new Secret('demo-owner-token')),
      env,
    });
    try {
      return await runRotations(runtime, { keys: [key], trigger: { reason: 'scheduled', force: false } });
    } finally {
      await runtime.close();
    }
  };
  expect((await run()).rotated).toBe(1);
  await forge();
  const summary = await run();
  const distrusted = lines
    .map((line) => JSON.parse(line) as AuditRecord)
    .filter((e) => e.event === 'key.record.distrusted');
  return { summary, alerter, distrusted };
}

type ForgedRun = (forged: Forgery) => ReturnType<typeof forgedRun>;

/** The two cases every backend must pass; `start` is undefined when its server is missing (outside CI). */
function forgeryCases(name: string, start: () => ForgedRun | undefined): void {
  describe(`a forged failure record in ${name}`, () => {
    it('quarantinedAt "x" on a key 90 days overdue: the key is rotated, the forgery audited', async (ctx) => {
      const run = start();
      if (!run) return ctx.skip();
      const { summary, distrusted } = await run(forgery({ quarantinedAt: 'x', lastAlertedAt: 'x' }));
      expect(summary.outcomes[0]).toMatchObject({ result: 'rotated' });
      expect(distrusted.map((e) => [e.record, e.field, e.problem])).toEqual([
        ['lastFailure', 'quarantinedAt', 'malformed'],
        ['lastFailure', 'lastAlertedAt', 'malformed'],
      ]);
    });

    it('a quarantine whose last alert lies in the future: reminded now', async (ctx) => {
      const run = start();
      if (!run) return ctx.skip();
      const { summary, alerter, distrusted } = await run(
        forgery({ quarantinedAt: ago(DAY), lastAlertedAt: '2099-01-01T00:00:00.000Z' }),
      );
      expect(summary.outcomes[0]).toMatchObject({ result: 'skipped', detail: 'quarantined' });
      expect(alerter.alerts.map((a) => a.alert.errorCode)).toEqual(['KR_KEY_QUARANTINED']);
      expect(distrusted[0]).toMatchObject({ field: 'lastAlertedAt', problem: 'future' });
    });
  });
}

/** What someone with the metadata path (not the data path) writes into OpenBao custom_metadata. */
const forgeVault = (server: VaultServer, path: string, forged: Forgery) => async (): Promise<void> => {
  const admin = vaultAdmin(server);
  const current = await admin.customMetadata(path);
  await admin.must('POST', `secret/metadata/${path}`, {
    custom_metadata: {
      ...current,
      keyroll_last_rotated_at: forged.lastRotatedAt,
      keyroll_last_failure: JSON.stringify(forged.failure),
    },
  });
};

/** What someone with secretsmanager:TagResource (not PutSecretValue) writes into the tags. */
const forgeTags = (server: MotoServer, path: string, forged: Forgery) => async (): Promise<void> => {
  const sdk = sdkClient(server);
  const { failure } = forged;
  try {
    await sdk.send(
      new TagResourceCommand({
        SecretId: path,
        Tags: [
          { Key: 'keyroll:last-rotated-at', Value: forged.lastRotatedAt },
          {
            Key: 'keyroll:last-failure',
            Value: `${failure.rotationId} ${failure.at} ${failure.errorCode} ${failure.step}`,
          },
          {
            Key: 'keyroll:failure-streak',
            Value: `${String(failure.consecutive)} ${failure.firstAt} - ${failure.quarantinedAt} ${failure.lastAlertedAt}`,
          },
        ],
      }),
    );
  } finally {
    sdk.destroy();
  }
};

forgeryCases('OpenBao custom_metadata', () => {
  const server = vaultServer();
  if (!server) return undefined;
  return (forged) => {
    const path = `forged-${randomUUID().slice(0, 8)}/${KEY}`;
    const backend: BackendConfig = {
      kind: 'vault',
      address: server.address,
      mount: 'secret',
      timeoutMs: 5000,
      auth: { method: 'token', token: 'env:KEYROLL_FORGED_VAULT_TOKEN' },
    };
    return forgedRun(
      backend,
      path,
      { ...process.env, KEYROLL_FORGED_VAULT_TOKEN: server.rootToken },
      forgeVault(server, path, forged),
    );
  };
});

forgeryCases('AWS Secrets Manager tags (moto)', () => {
  const server = motoServer();
  if (!server) return undefined;
  return (forged) => {
    const path = `keyroll-forged/${randomUUID().slice(0, 8)}/${KEY}`;
    const backend: BackendConfig = {
      kind: 'aws',
      endpoint: server.endpoint,
      region: server.region,
      createIfMissing: true,
      tags: {},
      timeoutMs: 5000,
    };
    return forgedRun(backend, path, motoEnv(server), forgeTags(server, path, forged));
  };
});
