// The runbook's escrow recovery, end to end: a leak rotation whose destination breaks while the
// roll is at the API ends with the new secret sealed in escrow (exit 1, critical alert); the
// operator opens the file with the stock `age` CLI, checks the fingerprint, puts the secret in
// place, and the next `keyroll run` finds it working and clears the intent (KR_RECOVERED_INTENT).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, rm, rmdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { generateIdentity, identityToRecipient } from 'age-encryption';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createDelayGate, eventsNamed, openFileBackend, TARGETS, useCliFixture } from './harness.ts';

const run = promisify(execFile);
const gate = createDelayGate();
const cli = useCliFixture({ sleep: gate.sleep });
beforeEach(() => {
  gate.reset();
});

// The property the runbook relies on is that stock `age -d` opens the file; scripts/test-tools.sh
// provides the CLI (as for test/rotation/escrow.test.ts). Missing under CI=true fails the run.
let agePath: string | undefined;
beforeAll(async () => {
  try {
    const { stdout } = await run('sh', [resolve(import.meta.dirname, '../../scripts/test-tools.sh')], {
      timeout: 300_000,
    });
    agePath = /^age=(.+)$/m.exec(stdout)?.[1];
  } catch {
    agePath = undefined;
  }
  if (agePath === undefined && process.env.CI === 'true')
    throw new Error('the age CLI is required in CI (scripts/test-tools.sh could not install it)');
}, 300_000);

interface EscrowContent {
  keyId: string;
  organizationId: string;
  rotationId: string;
  rotatedAt: string;
  apiKey: string;
}

describe('runbook: recovering a secret from escrow', () => {
  it('age -d opens the escrow file, the restored secret is live, and the next run clears the intent', async ({
    skip,
  }) => {
    if (agePath === undefined) return skip('age CLI missing: run scripts/test-tools.sh');
    const identity = await generateIdentity();
    const identityFile = join(cli.dir, 'identity.txt');
    await writeFile(identityFile, `${identity}\n`, { mode: 0o600 });
    cli.alsoSecret(identity);
    await cli.writePolicy({
      escrowRecipients: [await identityToRecipient(identity)],
      extraDefaults: '  store: { attempts: 1 }\n',
    });
    expect((await cli.run(['run', '-p', 'policy.yaml'])).code).toBe(0);

    // The leak rotation's roll waits at the API while the destination breaks: a directory now
    // sits where billing.json must be written.
    cli.emulator.faults.inject('roll', { kind: 'delay', ms: 60_000 });
    const leak = cli.spawn([
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
      'INC-5',
    ]);
    await gate.reached();
    const valuePath = join(cli.secretsDir, TARGETS.key_demo_billing.path);
    await rm(valuePath);
    await mkdir(valuePath);
    gate.release();
    const failed = await leak.result;

    expect(failed.code).toBe(1);
    const [escrowed] = eventsNamed(failed, 'key.escrowed');
    expect(escrowed).toMatchObject({ keyId: 'key_demo_billing', actor: 'alice', reason: 'leak' });
    // An absolute path, resolved from the policy's directory (here relative to the run's working
    // directory), so the operator can open the file named in the alert from anywhere.
    expect(escrowed?.path).toBe(
      join(cli.dir, 'escrow', `key_demo_billing-${String(escrowed?.rotationId)}.age`),
    );
    const alerts = cli.receiver.requests.map((r) => r.body as Record<string, unknown>);
    expect(alerts).toEqual([
      expect.objectContaining({
        severity: 'critical',
        step: 'store',
        summary: expect.stringContaining(`sealed in escrow at ${String(escrowed?.path)}`) as unknown,
      }),
    ]);
    const escrowFile = String(escrowed?.path);

    // Runbook step 2: open it with age and compare fingerprints.
    const { stdout } = await run(agePath, ['-d', '-i', identityFile, escrowFile]);
    const content = JSON.parse(stdout) as EscrowContent;
    expect(content).toMatchObject({
      keyId: 'key_demo_billing',
      organizationId: 'org_demo_acme',
      rotationId: escrowed?.rotationId,
    });
    expect(createHash('sha256').update(content.apiKey).digest('hex').slice(0, 12)).toBe(
      escrowed?.fingerprint,
    );
    expect(cli.emulator.state.isLiveSecret('key_demo_billing', content.apiKey)).toBe(true);

    // Runbook step 3: the destination is repaired and the secret put in place, in the key's shape.
    await rmdir(valuePath);
    const { apiKey, keyId, organizationId, rotatedAt } = content;
    await writeFile(valuePath, `${JSON.stringify({ apiKey, keyId, organizationId, rotatedAt }, null, 2)}\n`, {
      mode: 0o600,
    });
    expect(
      (await (await openFileBackend(cli.secretsDir)).readState(TARGETS.key_demo_billing)).intent?.rotationId,
    ).toBe(escrowed?.rotationId);

    // Runbook step 4: the next run probes, finds the secret working, clears the marker.
    const rollsBefore = cli.emulator.state.rollCount('key_demo_billing');
    const next = await cli.run(['run', '-p', 'policy.yaml']);
    expect(next.code).toBe(0);
    expect(eventsNamed(next, 'key.recovered')).toEqual([
      expect.objectContaining({ keyId: 'key_demo_billing', result: 'stored-secret-works' }),
    ]);
    expect(cli.emulator.state.rollCount('key_demo_billing')).toBe(rollsBefore);
    expect(
      (await (await openFileBackend(cli.secretsDir)).readState(TARGETS.key_demo_billing)).intent,
    ).toBeUndefined();
    expect(cli.receiver.requests.map((r) => (r.body as Record<string, unknown>).errorCode)).toContain(
      'KR_RECOVERED_INTENT',
    );
  });
});
