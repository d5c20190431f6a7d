// The bundle the image runs (scripts/build.ts), end to end against the real servers: a rotation
// into OpenBao, a rotation into Secrets Manager (moto), and the daemon's HTTP endpoints. The unit
// test (test/packaging/bundle.test.ts) only runs the demo (file backend); these are the chunks it
// never loads, and bundling changes how they load (a dynamic import() of a CommonJS package gets
// only a default export there: the AWS SDK and prom-client were each caught by such a run).
import { GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nextEvent, ORG, useCliFixture } from '../cli/harness.ts';
import { installBundle } from '../support/bundle-install.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { childrenOf, onlySpan, otlpEnv, startOtlpReceiver } from '../support/otlp-receiver.ts';
import { motoEnv, sdkClient } from './aws-fixtures.ts';
import { motoServer, vaultServer } from './servers.ts';
import { uniqueName, vaultAdmin } from './vault-admin.ts';

const cli = useCliFixture();
const KEY_IDS = ['key_demo_billing', 'key_demo_search', 'key_demo_ingest'] as const;
let entry: string;
let remove: (() => Promise<void>) | undefined;

beforeAll(async () => {
  ({ entry, remove } = await installBundle('keyroll-bundle-e2e-'));
}, 60_000);

afterAll(async () => {
  await remove?.();
});

function policyFor(backendLine: string, pathOf: (keyId: string) => string): string {
  const keys = KEY_IDS.map(
    (id) =>
      `  - { id: ${id}, organization: ${ORG}, destinations: [{ backend: dest, path: "${pathOf(id)}" }] }`,
  ).join('\n');
  return `version: 1
api:
  baseUrl: ${cli.emulator.url}
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
backends:
  dest: ${backendLine}
defaults:
  maxAge: 30d
  minInterval: 1h
keys:
${keys}
`;
}

describe('the bundled CLI against the real servers', () => {
  it('rotates into OpenBao: every stored secret is the live one', async (ctx) => {
    // Under CI=true a missing server fails the run (servers.ts); elsewhere the test is skipped.
    const server = vaultServer();
    if (!server) return ctx.skip();
    const prefix = uniqueName('bundle');
    await cli.writeFile(
      'vault.yaml',
      policyFor(
        `{ kind: vault, address: "${server.address}", mount: secret, auth: { method: token, token: env:VAULT_TOKEN } }`,
        (id) => `${prefix}/${id}`,
      ),
    );
    cli.alsoSecret(server.rootToken);
    const result = await cli.run(['rotate', '--all', '--reason', 'manual', '-p', 'vault.yaml'], {
      entry,
      env: { VAULT_TOKEN: server.rootToken },
    });
    expect(result.stderr).not.toMatch(/is not a (?:constructor|function)/);
    expect(result.code).toBe(0);
    expect(result.lastLine).toBe('rotated 3, failed 0, skipped 0');
    for (const id of KEY_IDS) {
      const stored = await vaultAdmin(server).readData(`${prefix}/${id}`);
      expect(cli.emulator.state.isLiveSecret(id, String(stored.data?.apiKey))).toBe(true);
    }
  });

  it('rotates into Secrets Manager (moto): every stored secret is the live one', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const prefix = uniqueName('bundle');
    await cli.writeFile(
      'aws.yaml',
      policyFor(
        `{ kind: aws, endpoint: "${server.endpoint}", region: ${server.region}, createIfMissing: true }`,
        (id) => `${prefix}/${id}`,
      ),
    );
    const result = await cli.run(['rotate', '--all', '--reason', 'manual', '-p', 'aws.yaml'], {
      entry,
      env: { ...motoEnv(server) },
    });
    expect(result.stderr).not.toMatch(/is not a (?:constructor|function)/);
    expect(result.code).toBe(0);
    expect(result.lastLine).toBe('rotated 3, failed 0, skipped 0');
    const sdk = sdkClient(server);
    try {
      for (const id of KEY_IDS) {
        // By stage: moto's unlabelled default does not follow AWSCURRENT.
        const stored = await sdk.send(
          new GetSecretValueCommand({ SecretId: `${prefix}/${id}`, VersionStage: 'AWSCURRENT' }),
        );
        const value = JSON.parse(stored.SecretString ?? '{}') as { apiKey?: string };
        expect(cli.emulator.state.isLiveSecret(id, String(value.apiKey ?? stored.SecretString))).toBe(true);
      }
    } finally {
      sdk.destroy();
    }
  });

  it('traces a rotation into Secrets Manager (moto): the AWS SDK calls are spans beneath their steps, as from the sources', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const prefix = uniqueName('bundle-trace');
    await cli.writeFile(
      'aws.yaml',
      policyFor(
        `{ kind: aws, endpoint: "${server.endpoint}", region: ${server.region}, createIfMissing: true }`,
        (id) => `${prefix}/${id}`,
      ),
    );
    cli.alsoSecret(server.secretAccessKey);
    const otlp = await startOtlpReceiver();
    try {
      const result = await cli.run(
        ['rotate', '--key', 'key_demo_billing', '--reason', 'manual', '-p', 'aws.yaml'],
        { entry, env: { ...motoEnv(server), ...otlpEnv(otlp) } },
      );
      expect(result.code, result.stderr).toBe(0);
      expect(result.stderr).not.toContain('tracing');
      const put = onlySpan(otlp.spans, 'SecretsManager.PutSecretValue');
      expect(put.parentSpanId).toBe(onlySpan(otlp.spans, 'store').spanId);
      expect(childrenOf(otlp.spans, onlySpan(otlp.spans, 'roll')).map((span) => span.scope)).toEqual([
        '@opentelemetry/instrumentation-undici',
      ]);
      const secrets = [...cli.emulator.state.mintedSecrets(), server.secretAccessKey];
      expectNoSecrets(otlp.bodies, secrets, 'exported spans');
    } finally {
      await otlp.close();
    }
  });

  it('runs the daemon: /healthz answers, /metrics has keyroll and process metrics, SIGTERM exits 0', async () => {
    await cli.writePolicy();
    const running = cli.spawn(['daemon', '-p', 'policy.yaml', '--listen', '127.0.0.1:0'], { entry });
    try {
      // The daemon's `daemon.started` audit line names the address it listens on.
      const { listen } = (await nextEvent(running, 'daemon.started')) as { listen: string };
      expect((await fetch(`http://${listen}/healthz`)).status).toBe(200);
      const metrics = await (await fetch(`http://${listen}/metrics`)).text();
      expect(metrics).toContain('keyroll_rotations_total');
      expect(metrics).toContain('process_cpu_user_seconds_total');
      running.child.kill('SIGTERM');
      expect((await running.result).code).toBe(0);
    } finally {
      running.child.kill('SIGKILL');
    }
  });
});
