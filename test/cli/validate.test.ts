// `keyroll validate`: the policy against the schema (exit 2, file:line and the field), then a
// preflight of every destination and of keyroll's API credential, rolling nothing.
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ORG, snapshotTree, useCliFixture } from './harness.ts';

const cli = useCliFixture();

/** A loopback port nothing listens on (it was free a moment ago). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  await new Promise<void>((resolve) =>
    server.close(() => {
      resolve();
    }),
  );
  return port;
}

describe('keyroll validate', () => {
  it('a valid policy with working destinations and credential exits 0, rolling nothing and writing no secret', async () => {
    await cli.writePolicy();
    const result = await cli.run(['validate', '-p', 'policy.yaml']);
    expect(result.code).toBe(0);
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines.every((line) => line.startsWith('ok  '))).toBe(true);
    expect(lines[0]).toContain('policy policy.yaml — 3 keys, 1 backends');
    expect(result.stdout).toContain(`api credential env:KEYROLL_API_TOKEN — ${cli.emulator.url}`);
    for (const path of ['billing.json', 'search.key', 'ingest.json'])
      expect(result.stdout).toContain(`destination files:${path}`);
    expect(cli.emulator.state.totalRolls()).toBe(0);
    expect(Object.keys(await snapshotTree(cli.secretsDir))).toEqual([]);
  });

  it('a broken policy exits 2 and names file:line and the field of every problem, contacting nothing', async () => {
    const path = await cli.writePolicy();
    const lines = (await readFile(path, 'utf8')).split('\n');
    // A misspelt field on the billing key and a cron that is not one on the search key.
    const billingDestinations = lines.findIndex((l) => l.includes('path: billing.json'));
    lines.splice(billingDestinations + 1, 0, '    minIntervall: 2h');
    const searchDestinations = lines.findIndex((l) => l.includes('path: search.key'));
    lines.splice(searchDestinations + 1, 0, '    schedule: "every monday"');
    await cli.writeFile('broken.yaml', lines.join('\n'));

    const result = await cli.run(['validate', '-p', 'broken.yaml']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      `broken.yaml:${billingDestinations + 2} keys[0].minIntervall: is not a known field (did you mean "minInterval"?)`,
    );
    expect(result.stderr).toContain(`broken.yaml:${searchDestinations + 2} keys[1].schedule:`);
    expect(result.stdout).toBe('');
    expect(cli.emulator.state.callCount('listProjects')).toBe(0);
  });

  it('--offline checks the policy only and contacts neither the API nor a backend', async () => {
    await cli.writePolicy();
    const result = await cli.run(['validate', '-p', 'policy.yaml', '--offline']);
    expect(result.code).toBe(0);
    expect(result.stdout.trimEnd().split('\n')).toHaveLength(1);
    expect(cli.emulator.state.callCount('listProjects')).toBe(0);
    // The file backend was never opened: its directory was not even created.
    expect(existsSync(cli.secretsDir)).toBe(false);
  });

  it('a Vault address over plain http:// to another machine exits 2 with file:line, contacting nothing', async () => {
    const path = await cli.writePolicy({
      extraBackends:
        '  vault-remote: { kind: vault, address: "http://vault.example.com:8200", auth: { method: token, token: env:VAULT_TOKEN } }\n',
    });
    const line = (await readFile(path, 'utf8')).split('\n').findIndex((l) => l.includes('vault-remote:')) + 1;
    const result = await cli.run(['validate', '-p', 'policy.yaml']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      `policy.yaml:${line} backends.vault-remote.address: uses plain http:// to "vault.example.com", which is not this machine`,
    );
    expect(cli.emulator.state.callCount('listProjects')).toBe(0);
  });

  it('allowInsecureHttp: true is accepted, and validate warns about it with file:line (text and json)', async () => {
    const path = await cli.writePolicy({
      extraBackends:
        '  vault-remote: { kind: vault, address: "http://vault.example.com:8200", allowInsecureHttp: true, auth: { method: token, token: env:VAULT_TOKEN } }\n',
    });
    const line = (await readFile(path, 'utf8')).split('\n').findIndex((l) => l.includes('vault-remote:')) + 1;
    const warning = `policy.yaml:${line} backends.vault-remote.allowInsecureHttp: is true: address uses plain http:// to "vault.example.com", so credentials and secrets sent there cross the network in clear`;
    const text = await cli.run(['validate', '-p', 'policy.yaml', '--offline']);
    expect(text.code).toBe(0);
    expect(text.stdout.split('\n')).toContain(`warn  ${warning}`);
    const json = await cli.run(['validate', '-p', 'policy.yaml', '--offline', '-o', 'json']);
    expect(json.code).toBe(0);
    const warnings = (JSON.parse(json.stdout) as { warnings: { file: string; line: number; path: string }[] })
      .warnings;
    expect(warnings).toEqual([
      expect.objectContaining({ file: 'policy.yaml', line, path: 'backends.vault-remote.allowInsecureHttp' }),
    ]);
  });

  it('an unreachable destination exits 1 and names the backend, the path and the error code', async () => {
    await cli.writePolicy({
      extraBackends: `  vault-down: { kind: vault, address: "http://127.0.0.1:${await closedPort()}", timeoutMs: 2000, auth: { method: token, token: env:VAULT_TOKEN } }\n`,
      extraKeys: `  - id: key_demo_legacy\n    organization: ${ORG}\n    destinations: [{ backend: vault-down, path: apps/legacy }]\n`,
    });
    cli.alsoSecret('vault-token-for-a-server-that-is-down');
    const result = await cli.run(['validate', '-p', 'policy.yaml', '-o', 'json'], {
      env: { VAULT_TOKEN: 'vault-token-for-a-server-that-is-down' },
    });
    expect(result.code).toBe(1);
    const checks = (
      JSON.parse(result.stdout) as {
        checks: { check: string; ok: boolean; errorCode?: string; detail?: string }[];
      }
    ).checks;
    expect(checks.filter((c) => !c.ok)).toEqual([
      expect.objectContaining({
        check: 'destination vault-down:apps/legacy',
        errorCode: 'KR_BACKEND_UNAVAILABLE',
        detail: expect.stringContaining('key_demo_legacy') as unknown,
      }),
    ]);
    expect(checks.filter((c) => c.ok)).toHaveLength(5);
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });

  // Known gap, reported to the lead: a client secret the OAuth token endpoint refuses
  // (401 invalid_client) is KR_API_CREDENTIAL_UNAVAILABLE, so validate exits 1 (a destination
  // problem) instead of 3 (keyroll's credential refused). Flip to `it` once it exits 3.
  it('a refused OAuth2 client secret exits 3, like a refused token', async () => {
    cli.alsoSecret('not-the-client-secret');
    await cli.writePolicy({
      credential: `{ type: oauth2, tokenUrl: "${cli.emulator.url}/oauth/token", clientId: demo-keyroll-client, clientSecret: env:KEYROLL_OAUTH_SECRET }`,
    });
    const result = await cli.run(['validate', '-p', 'policy.yaml'], {
      env: { KEYROLL_OAUTH_SECRET: 'not-the-client-secret' },
    });
    expect(result.stdout).toMatch(/^FAIL\s+api credential oauth2 client demo-keyroll-client/m);
    expect(result.code).toBe(3);
  });

  it('a refused API credential exits 3 and says which credential to check', async () => {
    await cli.writePolicy();
    const result = await cli.run(['validate', '-p', 'policy.yaml'], {
      env: { KEYROLL_API_TOKEN: 'expired-or-wrong' },
    });
    expect(result.code).toBe(3);
    expect(result.stdout).toMatch(
      /^FAIL\s+api credential env:KEYROLL_API_TOKEN — refused \(401\): check that it is set, valid and not expired \[KR_API_UNAUTHORIZED\]$/m,
    );
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });
});
