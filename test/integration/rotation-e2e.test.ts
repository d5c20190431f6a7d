// A whole rotation from the emulator to each real backend: OpenBao (Vault KV v2) and moto
// (AWS Secrets Manager), through the same engine the CLI uses. Checks that the stored secret is
// the live one, the old one is dead, bookkeeping is recorded, and records the exposure window.
import { randomUUID } from 'node:crypto';
import { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { describe, expect, it } from 'vitest';
import { emulatorApi, useEmulator } from '../support/emulator.ts';
import { staticCredential } from '../../src/api/credentials.ts';
import { createAuditLog, type AuditRecord } from '../../src/audit/logger.ts';
import { Secret } from '../../src/audit/secret.ts';
import type { BackendConfig } from '../../src/backends/config.ts';
import type { KeyPolicy, Policy } from '../../src/policy/schema.ts';
import { createRuntime } from '../../src/rotation/runtime.ts';
import { runRotations } from '../../src/rotation/run.ts';
import { RecordingAlerter, keyPolicy } from '../rotation/harness.ts';
import { motoEnv, sdkClient } from './aws-fixtures.ts';
import { motoServer, vaultServer } from './servers.ts';

const KEYS = ['key_demo_billing', 'key_demo_search', 'key_demo_ingest'];
const emulator = useEmulator();

async function rotateAll(backend: BackendConfig, pathOf: (keyId: string) => string, env?: NodeJS.ProcessEnv) {
  const lines: string[] = [];
  const audit = createAuditLog({ destination: { write: (line: string) => void lines.push(line) } });
  const keys: KeyPolicy[] = KEYS.map((id) =>
    keyPolicy(id, emulator.state.apiKey(id).organizationId, {
      destinations: [
        {
          backend: 'real',
          target: {
            path: pathOf(id),
            shape: { format: 'json', secretField: 'apiKey', fields: ['keyId', 'rotatedAt'] },
          },
        },
      ],
    }),
  );
  const policy: Policy = {
    file: 'e2e.yaml',
    api: emulatorApi(emulator.url),
    backends: { real: backend },
    alerts: { sinks: {} },
    keys,
  };
  const alerter = new RecordingAlerter();
  const runtime = await createRuntime(policy, {
    audit,
    alerter,
    credentials: staticCredential(new Secret('demo-owner-token')),
    ...(env ? { env } : {}),
  });
  const before = new Map(KEYS.map((id) => [id, emulator.state.currentSecret(id)]));
  try {
    const summary = await runRotations(runtime, { keys, trigger: { reason: 'manual', force: true } });
    const events = lines.map((l) => JSON.parse(l) as AuditRecord);
    const state = await Promise.all(
      keys.map((k) => runtime.resolveKey(k).destinations[0]).map((d) => d.backend.readState(d.target)),
    );
    const stored = await Promise.all(
      keys.map((k) => runtime.resolveKey(k).destinations[0]).map((d) => d.backend.readSecret(d.target)),
    );
    return { summary, events, alerter, before, state, stored };
  } finally {
    await runtime.close();
  }
}

function exposureFigures(events: AuditRecord[]): number[] {
  return events.filter((e) => e.event === 'key.stored').map((e) => e.exposureMs as number);
}

describe('rotation end to end: emulator → OpenBao (Vault KV v2)', () => {
  it('rotates every key into OpenBao; the stored secret is live, the old one dead, bookkeeping recorded', async (ctx) => {
    const server = vaultServer();
    if (!server) return ctx.skip();
    const prefix = `e2e-${randomUUID().slice(0, 8)}`;
    const { summary, events, alerter, before, state, stored } = await rotateAll(
      {
        kind: 'vault',
        address: server.address,
        mount: 'secret',
        timeoutMs: 5000,
        auth: { method: 'token', token: 'env:KEYROLL_E2E_VAULT_TOKEN' },
      },
      (id) => `${prefix}/${id}`,
      { ...process.env, KEYROLL_E2E_VAULT_TOKEN: server.rootToken },
    );
    expect(summary.rotated).toBe(3);
    expect(alerter.alerts).toEqual([]);
    KEYS.forEach((id, i) => {
      expect(emulator.state.isLiveSecret(id, stored[i]!.secret.reveal())).toBe(true);
      expect(emulator.state.isLiveSecret(id, before.get(id)!)).toBe(false);
      expect(state[i]?.lastRotatedAt).toEqual(expect.any(String));
      expect(state[i]?.intent).toBeUndefined();
    });
    const exposure = exposureFigures(events);
    expect(exposure).toHaveLength(3);
    console.log(`exposure window to OpenBao (ms): ${exposure.join(', ')}`);
  });
});

describe('rotation end to end: emulator → moto (AWS Secrets Manager)', () => {
  it('rotates every key into Secrets Manager; AWSCURRENT is live, the old one dead, bookkeeping recorded', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const prefix = `keyroll-e2e/${randomUUID().slice(0, 8)}`;
    const { summary, events, alerter, before, state, stored } = await rotateAll(
      {
        kind: 'aws',
        endpoint: server.endpoint,
        region: server.region,
        createIfMissing: true,
        tags: {},
        timeoutMs: 5000,
      },
      (id) => `${prefix}/${id}`,
      motoEnv(server),
    );
    expect(summary.rotated).toBe(3);
    expect(alerter.alerts).toEqual([]);
    const sdk = sdkClient(server);
    for (const [i, id] of KEYS.entries()) {
      expect(emulator.state.isLiveSecret(id, stored[i]!.secret.reveal())).toBe(true);
      expect(emulator.state.isLiveSecret(id, before.get(id)!)).toBe(false);
      expect(state[i]?.lastRotatedAt).toEqual(expect.any(String));
      // By stage: moto's unlabelled default does not follow AWSCURRENT.
      const current = await sdk.send(
        new GetSecretValueCommand({ SecretId: `${prefix}/${id}`, VersionStage: 'AWSCURRENT' }),
      );
      expect((JSON.parse(current.SecretString ?? '{}') as { apiKey?: string }).apiKey).toBe(
        stored[i]!.secret.reveal(),
      );
    }
    sdk.destroy();
    console.log(`exposure window to moto (ms): ${exposureFigures(events).join(', ')}`);
  });
});
