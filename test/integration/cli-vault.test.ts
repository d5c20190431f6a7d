// The commands against a real OpenBao (Vault KV v2): `validate`, `run`, `status`, `plan`,
// `rotate --reason leak`, and the runbook's way of clearing a lock left by a dead runner. The
// CLI runs as a child process; the emulator and the alert receiver run in this process.
import { describe, expect, it } from 'vitest';
import { eventsNamed, ORG, useCliFixture, type CliFixture, type CliResult } from '../cli/harness.ts';
import { vaultServer, type VaultServer } from './servers.ts';
import { uniqueName, vaultAdmin } from './vault-admin.ts';

const cli = useCliFixture();
const KEYS = { key_demo_billing: 'billing', key_demo_search: 'search', key_demo_ingest: 'ingest' } as const;
type KeyId = keyof typeof KEYS;

interface VaultSetup {
  server: VaultServer;
  prefix: string;
  pathOf(keyId: KeyId): string;
  /** Runs the CLI with the Vault token in its environment (root unless given). */
  run(args: readonly string[], token?: string): Promise<CliResult>;
}

async function setUpVault(fixture: CliFixture, server: VaultServer): Promise<VaultSetup> {
  const prefix = uniqueName('cli');
  const pathOf = (keyId: KeyId): string => `${prefix}/${KEYS[keyId]}`;
  const keys = (Object.keys(KEYS) as KeyId[])
    .map(
      (id) =>
        `  - id: ${id}\n    organization: ${ORG}\n    destinations: [{ backend: vault, path: ${pathOf(id)} }]\n`,
    )
    .join('');
  await fixture.writeFile(
    'policy.yaml',
    `version: 1
api:
  baseUrl: ${fixture.emulator.url}
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
backends:
  vault: { kind: vault, address: "${server.address}", mount: secret, timeoutMs: 5000, auth: { method: token, token: env:VAULT_TOKEN } }
alerts:
  sinks:
    hook: { kind: webhook, url: "${fixture.receiver.url}/alerts" }
defaults:
  schedule: "0 3 * * 1"
  minInterval: 1h
keys:
${keys}`,
  );
  fixture.alsoSecret(server.rootToken);
  return {
    server,
    prefix,
    pathOf,
    run: (args, token = server.rootToken) => fixture.run(args, { env: { VAULT_TOKEN: token } }),
  };
}

describe('the commands against OpenBao', () => {
  it('validate proves every destination writable (exit 0) and writes nothing', async (ctx) => {
    const server = vaultServer();
    if (!server) return ctx.skip();
    const vault = await setUpVault(cli, server);
    const result = await vault.run(['validate', '-p', 'policy.yaml']);
    expect(result.code).toBe(0);
    for (const id of Object.keys(KEYS) as KeyId[]) {
      expect(result.stdout).toMatch(
        new RegExp(`^ok\\s+destination vault:${vault.pathOf(id)} — ${id}: will be created`, 'm'),
      );
      expect((await vaultAdmin(server).readData(vault.pathOf(id))).status).toBe(404);
    }
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });

  it('run stores live secrets in KV v2, status -o json matches the audit trail, and plan afterwards changes nothing', async (ctx) => {
    const server = vaultServer();
    if (!server) return ctx.skip();
    const vault = await setUpVault(cli, server);
    const admin = vaultAdmin(server);
    const run = await vault.run(['run', '-p', 'policy.yaml']);
    expect(run.code).toBe(0);
    expect(run.lastLine).toBe('rotated 3, failed 0, skipped 0');
    for (const id of Object.keys(KEYS) as KeyId[]) {
      const stored = await admin.readData(vault.pathOf(id));
      expect(stored.version).toBe(1);
      expect(cli.emulator.state.isLiveSecret(id, String(stored.data?.apiKey))).toBe(true);
    }

    const status = await vault.run(['status', '-p', 'policy.yaml', '-o', 'json']);
    expect(status.code).toBe(0);
    const keys = (
      JSON.parse(status.stdout) as {
        keys: { keyId: string; lastRotationId: string; due: boolean; lock: unknown; intent: unknown }[];
      }
    ).keys;
    for (const key of keys) {
      expect(key.lastRotationId).toBe(
        eventsNamed(run, 'key.succeeded').find((e) => e.keyId === key.keyId)?.rotationId,
      );
      expect(key).toMatchObject({ due: false, lock: null, intent: null });
    }

    const rolls = cli.emulator.state.totalRolls();
    const versionsBefore = await Promise.all(
      (Object.keys(KEYS) as KeyId[]).map(
        async (id) => (await admin.must('GET', `secret/metadata/${vault.pathOf(id)}`)).data,
      ),
    );
    const plan = await vault.run(['plan', '-p', 'policy.yaml', '-o', 'json']);
    expect(plan.code).toBe(0);
    expect((JSON.parse(plan.stdout) as { keys: { due: boolean }[] }).keys.map((k) => k.due)).toEqual([
      false,
      false,
      false,
    ]);
    expect(cli.emulator.state.totalRolls()).toBe(rolls);
    const versionsAfter = await Promise.all(
      (Object.keys(KEYS) as KeyId[]).map(
        async (id) => (await admin.must('GET', `secret/metadata/${vault.pathOf(id)}`)).data,
      ),
    );
    expect(versionsAfter).toEqual(versionsBefore);
  });

  it('rotate --reason leak inside the minimum interval writes version 2; version 1 holds the dead secret', async (ctx) => {
    const server = vaultServer();
    if (!server) return ctx.skip();
    const vault = await setUpVault(cli, server);
    const admin = vaultAdmin(server);
    expect((await vault.run(['run', '-p', 'policy.yaml'])).code).toBe(0);
    const leak = await vault.run([
      'rotate',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_billing',
      '--reason',
      'leak',
      '--actor',
      'alice',
      '--ticket',
      'INC-1',
    ]);
    expect(leak.code).toBe(0);
    expect(leak.lastLine).toBe('rotated 1, failed 0, skipped 0');
    expect(eventsNamed(leak, 'key.stored')).toEqual([
      expect.objectContaining({
        keyId: 'key_demo_billing',
        version: '2',
        actor: 'alice',
        reason: 'leak',
        ticket: 'INC-1',
      }),
    ]);
    const current = await admin.readData(vault.pathOf('key_demo_billing'));
    const previous = (await admin.must('GET', `secret/data/${vault.pathOf('key_demo_billing')}?version=1`))
      .data as { data: { apiKey: string } };
    expect(current.version).toBe(2);
    expect(cli.emulator.state.isLiveSecret('key_demo_billing', String(current.data?.apiKey))).toBe(true);
    expect(cli.emulator.state.isLiveSecret('key_demo_billing', previous.data.apiKey)).toBe(false);
  });

  it('validate with a token that may not write the paths exits 1 with KR_BACKEND_DENIED for each destination', async (ctx) => {
    const server = vaultServer();
    if (!server) return ctx.skip();
    const vault = await setUpVault(cli, server);
    const narrow = await vaultAdmin(server).createToken({ policies: ['default'], ttl: '10m' });
    cli.alsoSecret(narrow);
    const result = await vault.run(['validate', '-p', 'policy.yaml', '-o', 'json'], narrow);
    expect(result.code).toBe(1);
    const failed = (
      JSON.parse(result.stdout) as { checks: { check: string; ok: boolean; errorCode?: string }[] }
    ).checks.filter((c) => !c.ok);
    expect(failed.map((c) => [c.check, c.errorCode])).toEqual(
      (Object.keys(KEYS) as KeyId[]).map((id) => [
        `destination vault:${vault.pathOf(id)}`,
        'KR_BACKEND_DENIED',
      ]),
    );
  });

  it('a lock left by a dead runner makes rotate exit 3 (busy) until it is released as the runbook says', async (ctx) => {
    const server = vaultServer();
    if (!server) return ctx.skip();
    const vault = await setUpVault(cli, server);
    const admin = vaultAdmin(server);
    const lockPath = `${vault.pathOf('key_demo_billing')}.keyroll-lock`;
    await admin.must('POST', `secret/data/${lockPath}`, {
      data: {
        owner: 'dead-host/1/gone',
        rotationId: 'r-dead',
        expiresAt: '2099-01-01T00:00:00.000Z',
        token: 'not-ours',
        state: 'held',
      },
    });

    const busy = await vault.run([
      'rotate',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_billing',
      '--reason',
      'leak',
      '--actor',
      'alice',
    ]);
    expect(busy.code).toBe(3);
    expect(eventsNamed(busy, 'key.lock.busy')).toEqual([
      expect.objectContaining({ holder: 'dead-host/1/gone', holderRotationId: 'r-dead' }),
    ]);
    const status = await vault.run(['status', '-p', 'policy.yaml', '-o', 'json']);
    expect(JSON.parse(status.stdout)).toMatchObject({
      keys: [{ keyId: 'key_demo_billing', lock: { owner: 'dead-host/1/gone' } }, {}, {}],
    });

    // docs/runbook.md: `bao kv put -mount=secret <path>.keyroll-lock state=released`
    await admin.must('POST', `secret/data/${lockPath}`, { data: { state: 'released' } });
    const freed = await vault.run([
      'rotate',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_billing',
      '--reason',
      'leak',
      '--actor',
      'alice',
    ]);
    expect(freed.code).toBe(0);
    expect(freed.lastLine).toBe('rotated 1, failed 0, skipped 0');
  });
});
