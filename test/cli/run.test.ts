// `keyroll run`: one pass over the policy (CronJob mode), as a child process against the emulator
// and a file backend.
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DEMO_KEYS,
  ORG,
  TARGETS,
  eventsNamed,
  openFileBackend,
  storedSecret,
  useCliFixture,
} from './harness.ts';

const cli = useCliFixture();
const SUMMARY = /^rotated (\d+), failed (\d+), skipped (\d+)( \(aborted: .*\))?$/;

describe('keyroll run', () => {
  it('rotates every due key into the file backend and prints the summary line last', async () => {
    await cli.writePolicy();
    const before = DEMO_KEYS.map((id) => cli.emulator.state.currentSecret(id));
    const result = await cli.run(['run', '-p', 'policy.yaml']);
    expect(result.code).toBe(0);
    expect(result.lastLine).toBe('rotated 3, failed 0, skipped 0');
    // Everything before the summary is an audit line; non-TTY output has no progress line.
    const lines = result.stdout.trimEnd().split('\n');
    expect(lines.slice(0, -1).every((line) => line.startsWith('{"level":'))).toBe(true);
    expect(result.stderr).toBe('');
    for (const [i, id] of DEMO_KEYS.entries()) {
      expect(cli.emulator.state.isLiveSecret(id, await storedSecret(cli.secretsDir, id))).toBe(true);
      expect(cli.emulator.state.isLiveSecret(id, before[i]!)).toBe(false);
      expect(cli.emulator.state.rollCount(id)).toBe(1);
    }
    expect(
      eventsNamed(result, 'key.succeeded')
        .map((e) => e.keyId)
        .sort(),
    ).toEqual([...DEMO_KEYS].sort());
    // Scheduled runs carry no actor or reason.
    expect(result.events.some((e) => 'actor' in e || 'reason' in e)).toBe(false);
    expect(eventsNamed(result, 'run.finished')[0]).toMatchObject({
      rotated: 3,
      failed: 0,
      skipped: 0,
      exitCode: 0,
    });
  });

  it('names each endpoint opted into plain HTTP once at start, on stderr and in the audit trail, never its URL', async () => {
    await cli.writePolicy({
      extraBackends:
        '  vault: { kind: vault, address: "http://vault.invalid:8200", allowInsecureHttp: true, auth: { method: token, token: env:KEYROLL_UNUSED_VAULT_TOKEN } }\n',
    });
    const result = await cli.run([
      'run',
      '-p',
      'policy.yaml',
      '--pushgateway',
      'http://pushgateway.invalid:9091/',
      '--pushgateway-allow-insecure-http',
    ]);
    expect(result.code).toBe(0);
    expect(result.stderr.split('\n').filter((line) => line.startsWith('keyroll: warning:'))).toEqual([
      'keyroll: warning: backends.vault.address uses plain http:// to "vault.invalid" (allowInsecureHttp: true): credentials and secrets sent there cross the network in clear',
      'keyroll: warning: --pushgateway uses plain http:// to "pushgateway.invalid" (--pushgateway-allow-insecure-http): credentials and secrets sent there cross the network in clear',
    ]);
    expect(eventsNamed(result, 'policy.plain_http').map((e) => [e.endpoint, e.host])).toEqual([
      ['backends.vault.address', 'vault.invalid'],
      ['--pushgateway', 'pushgateway.invalid'],
    ]);
    // Before the run starts, so an operator reading the trail meets it first.
    expect(result.events.findIndex((e) => e.event === 'policy.plain_http')).toBeLessThan(
      result.events.findIndex((e) => e.event === 'run.started'),
    );
  });

  it('a second run right after skips every key as not due and rolls nothing', async () => {
    await cli.writePolicy();
    expect((await cli.run(['run', '-p', 'policy.yaml'])).code).toBe(0);
    const second = await cli.run(['run', '-p', 'policy.yaml']);
    expect(second.code).toBe(0);
    expect(second.lastLine).toBe('rotated 0, failed 0, skipped 3');
    expect(eventsNamed(second, 'key.skipped').map((e) => [e.keyId, e.why])).toEqual(
      expect.arrayContaining(DEMO_KEYS.map((id) => [id, 'not-due'])),
    );
    expect(eventsNamed(second, 'key.rolled')).toEqual([]);
    expect(cli.emulator.state.totalRolls()).toBe(3);
  });

  it('authenticates with OAuth2 client credentials from the token endpoint', async () => {
    const clientSecret = 'demo-keyroll-client-secret';
    cli.alsoSecret(clientSecret);
    await cli.writePolicy({
      credential: `{ type: oauth2, tokenUrl: "${cli.emulator.url}/oauth/token", clientId: demo-keyroll-client, clientSecret: env:KEYROLL_OAUTH_SECRET, scope: "keys:roll projects:read" }`,
    });
    const result = await cli.run(['run', '-p', 'policy.yaml'], {
      env: { KEYROLL_API_TOKEN: undefined, KEYROLL_OAUTH_SECRET: clientSecret },
    });
    expect(result.code).toBe(0);
    expect(result.lastLine).toBe('rotated 3, failed 0, skipped 0');
  });

  it('a refused OAuth2 client secret aborts before any roll (exit 3), naming the client and the token endpoint', async () => {
    cli.alsoSecret('not-the-client-secret');
    await cli.writePolicy({
      credential: `{ type: oauth2, tokenUrl: "${cli.emulator.url}/oauth/token", clientId: demo-keyroll-client, clientSecret: env:KEYROLL_OAUTH_SECRET }`,
    });
    const result = await cli.run(['run', '-p', 'policy.yaml'], {
      env: { KEYROLL_API_TOKEN: undefined, KEYROLL_OAUTH_SECRET: 'not-the-client-secret' },
    });
    expect(result.code).toBe(3);
    expect(result.lastLine).toContain(`oauth2 client demo-keyroll-client at ${cli.emulator.url}/oauth/token`);
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });

  it('one key failing (unknown to the API) exits 1; the other keys still rotate and the failure is alerted', async () => {
    await cli.writePolicy({
      extraKeys: `  - id: key_demo_ghost\n    organization: ${ORG}\n    destinations: [{ backend: files, path: ghost.json }]\n`,
    });
    const result = await cli.run(['run', '-p', 'policy.yaml']);
    expect(result.code).toBe(1);
    expect(result.lastLine).toBe('rotated 3, failed 1, skipped 0');
    expect(eventsNamed(result, 'key.failed')).toEqual([
      expect.objectContaining({ keyId: 'key_demo_ghost', step: 'roll', errorCode: 'KR_API_NOT_FOUND' }),
    ]);
    const alerts = cli.receiver.requests.map((r) => r.body as Record<string, unknown>);
    expect(alerts).toEqual([
      expect.objectContaining({
        keyId: 'key_demo_ghost',
        step: 'roll',
        errorCode: 'KR_API_NOT_FOUND',
        severity: 'error',
      }),
    ]);
  });

  it('a refused credential aborts before any roll (exit 3), names the credential reference and alerts once', async () => {
    await cli.writePolicy();
    const result = await cli.run(['run', '-p', 'policy.yaml'], {
      env: { KEYROLL_API_TOKEN: 'not-a-valid-token' },
    });
    expect(result.code).toBe(3);
    expect(result.lastLine).toMatch(SUMMARY);
    expect(result.lastLine).toContain('env:KEYROLL_API_TOKEN');
    expect(result.lastLine).toContain('401');
    expect(cli.emulator.state.totalRolls()).toBe(0);
    expect(eventsNamed(result, 'run.aborted')).toEqual([
      expect.objectContaining({ why: 'credential-refused' }),
    ]);
    const alerts = cli.receiver.requests.map((r) => r.body as Record<string, unknown>);
    expect(alerts).toEqual([
      expect.objectContaining({ severity: 'critical', step: 'run', errorCode: 'KR_RUN_CREDENTIAL_REFUSED' }),
    ]);
  });

  it('every key locked by another runner aborts with exit 3 and rolls nothing; removing the lock files (runbook) frees the keys', async () => {
    await cli.writePolicy();
    const backend = await openFileBackend(cli.secretsDir);
    for (const id of DEMO_KEYS) {
      const locked = await backend.acquireLock(TARGETS[id], {
        owner: 'other-host/4242/abcd',
        rotationId: `other-${id}`,
        ttlMs: 15 * 60_000,
      });
      expect(locked.acquired).toBe(true);
    }
    const result = await cli.run(['run', '-p', 'policy.yaml']);
    expect(result.code).toBe(3);
    expect(result.lastLine).toContain('aborted: every key in scope was locked by another runner');
    expect(eventsNamed(result, 'key.lock.busy').map((e) => e.holder)).toEqual([
      'other-host/4242/abcd',
      'other-host/4242/abcd',
      'other-host/4242/abcd',
    ]);
    expect(cli.emulator.state.totalRolls()).toBe(0);

    // docs/runbook.md, "Clearing a stale lock", file backend: rm <directory>/<path>.keyroll.lock
    for (const id of DEMO_KEYS) await rm(join(cli.secretsDir, `${TARGETS[id].path}.keyroll.lock`));
    const freed = await cli.run(['run', '-p', 'policy.yaml']);
    expect(freed.code).toBe(0);
    expect(freed.lastLine).toBe('rotated 3, failed 0, skipped 0');
  });
});
