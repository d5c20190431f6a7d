// `keyroll identify` and `keyroll rotate --leaked-secret-stdin` (issue 13 §1-2), as an operator
// runs them: the leaked value piped into the child's stdin, never an argument. The fixture scans
// every byte the children wrote, and every alert, for each secret the emulator minted (the leaked
// values included), in every form (test/support/secret-scan.ts); the demo's secrets are added to
// that scan.
import { Readable } from 'node:stream';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Secret } from '../../src/audit/secret.ts';
import { readLeakedSecret } from '../../src/cli/leaked-stdin.ts';
import { sanitizeText } from '../../src/audit/sanitize.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import {
  ORG,
  TARGETS,
  eventsNamed,
  openFileBackend,
  storedSecret,
  useCliFixture,
  type CliResult,
} from './harness.ts';

const cli = useCliFixture();
const DEMO_POLICY = fileURLToPath(new URL('../../config/demo-policy.yaml', import.meta.url));
const SLOT_A = 'key_demo_billing_a';
const SLOT_B = 'key_demo_billing_b';
const SLOT_ENTRY = `  - id: billing-api
    organization: ${ORG}
    slots: [${SLOT_A}, ${SLOT_B}]
    consumerRefresh: 1h
    destinations: [{ backend: files, path: billing-api.json, shape: { format: json, fields: [keyId, organizationId, rotatedAt] } }]
`;

const fingerprintOf = (value: string): string => new Secret(value).fingerprint();

/** No value, in any form, in what the child wrote and every alert. */
function expectNotLeaked(results: readonly CliResult[], values: readonly string[]): void {
  const written = [
    ...results.flatMap((r) => [r.stdout, r.stderr]),
    ...cli.receiver.requests.map((r) => r.raw),
  ];
  expectNoSecrets(written, values, 'what the child wrote and every alert');
}

async function demoSecret(file: string): Promise<{ apiKey: string; keyId?: string }> {
  const stored = JSON.parse(await readFile(join(cli.dir, '.keyroll-demo', 'secrets', file), 'utf8')) as {
    apiKey: string;
    keyId?: string;
  };
  cli.alsoSecret(stored.apiKey);
  return stored;
}

describe('keyroll identify, after keyroll demo (the done-when check)', () => {
  it('the secret stored for key_demo_billing names key_demo_billing (exit 0); the slot entry names its active slot; a value that matches nothing exits 4', async () => {
    const demo = await cli.run(['demo']);
    expect(demo.code, demo.stderr).toBe(0);

    const billing = await demoSecret('billing.json');
    const found = await cli.run(['identify', '--policy', DEMO_POLICY], { stdin: `${billing.apiKey}\n` });
    expect(found.code, found.stderr).toBe(0);
    expect(found.stdout).toBe(
      'key_demo_billing organization=org_demo_acme destination=files:billing.json value=current\n',
    );

    const slot = await demoSecret('billing-api.json');
    const json = await cli.run(['identify', '--policy', DEMO_POLICY, '-o', 'json'], { stdin: slot.apiKey });
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toMatchObject({
      fingerprint: fingerprintOf(slot.apiKey),
      matches: [
        {
          keyId: 'billing-api',
          organizationId: 'org_demo_acme',
          backend: 'files',
          path: 'billing-api.json',
          which: 'current',
          slot: slot.keyId,
        },
      ],
      unread: [],
    });

    const nothing = 'kr_not_a_key_of_this_policy_0123456789';
    const missed = await cli.run(['identify', '--policy', DEMO_POLICY], { stdin: nothing });
    expect(missed.code).toBe(4);
    expect(missed.stdout).toBe('');
    expect(missed.stderr).toContain(
      `no policy entry holds this value (fingerprint ${fingerprintOf(nothing)})`,
    );
    cli.alsoSecret(nothing);
    expectNotLeaked([demo, found, json, missed], [billing.apiKey, slot.apiKey, nothing]);
  });
});

describe('keyroll identify: how the value gets in', () => {
  it('an empty stdin, or more than one line, is a usage error (exit 2) and names no value', async () => {
    await cli.writePolicy();
    const empty = await cli.run(['identify', '-p', 'policy.yaml']);
    expect(empty.code).toBe(2);
    expect(empty.stderr).toContain('standard input is empty');
    const twoLines = await cli.run(['identify', '-p', 'policy.yaml'], {
      stdin: 'first-line-value-1234\nsecond-line-value-5678\n',
    });
    expect(twoLines.code).toBe(2);
    expect(twoLines.stderr).toContain('more than one line');
    cli.alsoSecret('first-line-value-1234');
  });

  it('a terminal is refused with the ways to pipe the value in', async () => {
    const tty = Object.assign(Readable.from([Buffer.from('typed-value-on-a-terminal\n')]), { isTTY: true });
    await expect(readLeakedSecret(tty)).rejects.toThrow(/standard input is a terminal .*pipe it in/);
  });

  it('surrounding whitespace is dropped, and the value is blanked from any text at once', async () => {
    const value = 'kr_live_leaked_value_for_the_sanitizer';
    const leaked = await readLeakedSecret(
      Readable.from([Buffer.from(`  ${value.slice(0, 10)}`), Buffer.from(`${value.slice(10)}\r\n`)]),
    );
    expect(leaked.reveal()).toBe(value);
    expect(sanitizeText(`oops ${value} ${Buffer.from(value).toString('base64')}`)).not.toContain(
      value.slice(8),
    );
  });

  it('input larger than 16 KiB is refused, not searched', async () => {
    await expect(readLeakedSecret(Readable.from([Buffer.alloc(17 * 1024, 0x61)]))).rejects.toThrow(
      /more than 16 KiB/,
    );
  });
});

describe('keyroll rotate --leaked-secret-stdin', () => {
  it('rotates the key that holds the leaked value; the emulator then refuses the leaked value (401), audited leak.proven-dead', async () => {
    await cli.writePolicy();
    expect((await cli.run(['run', '-p', 'policy.yaml'])).code).toBe(0);
    const leaked = await storedSecret(cli.secretsDir, 'key_demo_billing');
    const result = await cli.run(
      [
        'rotate',
        '-p',
        'policy.yaml',
        '--leaked-secret-stdin',
        '--reason',
        'leak',
        '--actor',
        'alice',
        '--ticket',
        'INC-1',
        '--audit-file',
        'audit.jsonl',
      ],
      { stdin: `${leaked}\n` },
    );
    expect(result.code, result.stderr).toBe(0);
    expect(result.lastLine).toBe('rotated 1, failed 0, skipped 0');
    expect(cli.emulator.state.rollCount('key_demo_billing')).toBe(2);
    expect(cli.emulator.state.rollCount('key_demo_search')).toBe(1);
    // Dead: no key of the emulator answers to it any more.
    expect(cli.emulator.state.keyForSecret(leaked)).toBeUndefined();
    expect(
      cli.emulator.state.isLiveSecret(
        'key_demo_billing',
        await storedSecret(cli.secretsDir, 'key_demo_billing'),
      ),
    ).toBe(true);

    const fingerprint = fingerprintOf(leaked);
    expect(eventsNamed(result, 'leak.identified')).toEqual([
      expect.objectContaining({
        keyId: 'key_demo_billing',
        fingerprint,
        which: 'current',
        backend: 'files',
        path: 'billing.json',
        actor: 'alice',
        reason: 'leak',
        ticket: 'INC-1',
      }),
    ]);
    const rotationId = eventsNamed(result, 'key.succeeded')[0]?.rotationId;
    expect(eventsNamed(result, 'leak.proven-dead')).toEqual([
      expect.objectContaining({
        keyId: 'key_demo_billing',
        rotationId,
        fingerprint,
        status: 401,
        rotation: 'rotated',
        actor: 'alice',
        reason: 'leak',
        ticket: 'INC-1',
      }),
    ]);
    expect(result.stdout).toContain(
      `leaked value ${fingerprint}: key_demo_billing proven dead: the API refused it (401)`,
    );
    // The leak events ride on the run's own output: the audit file has them in order.
    const file = await readFile(join(cli.dir, 'audit.jsonl'), 'utf8');
    const named = file
      .split('\n')
      .filter(Boolean)
      .map((line) => (JSON.parse(line) as { event: string }).event);
    expect(
      named.filter((e) => e.startsWith('leak.') || e === 'run.started' || e === 'key.succeeded'),
    ).toEqual(['leak.identified', 'run.started', 'key.succeeded', 'leak.proven-dead']);
    expectNotLeaked([result, { ...result, stdout: file, stderr: '' }], cli.emulator.state.mintedSecrets());
  });

  it('a slot entry: the leaked current value rolls the active slot (the other slot is left alive), and -o json carries the proof', async () => {
    await cli.writePolicy({ extraKeys: SLOT_ENTRY });
    const seedA = cli.emulator.state.currentSecret(SLOT_A);
    expect((await cli.run(['run', '-p', 'policy.yaml'])).code).toBe(0);
    const stored = JSON.parse(await readFile(join(cli.secretsDir, 'billing-api.json'), 'utf8')) as {
      apiKey: string;
      keyId: string;
    };
    // The first rotation of a slot entry rolls the standby (slot B) and makes it active.
    expect(stored.keyId).toBe(SLOT_B);

    const result = await cli.run(['rotate', '-p', 'policy.yaml', '--leaked-secret-stdin', '-o', 'json'], {
      stdin: stored.apiKey,
    });
    expect(result.code, result.stderr).toBe(0);
    expect(cli.emulator.state.rollCount(SLOT_B)).toBe(2);
    expect(cli.emulator.state.rollCount(SLOT_A)).toBe(0);
    expect(cli.emulator.state.isLiveSecret(SLOT_A, seedA)).toBe(true);
    expect(cli.emulator.state.keyForSecret(stored.apiKey)).toBeUndefined();
    const after = JSON.parse(await readFile(join(cli.secretsDir, 'billing-api.json'), 'utf8')) as {
      apiKey: string;
      keyId: string;
    };
    expect(after.keyId).toBe(SLOT_B);
    expect(cli.emulator.state.isLiveSecret(SLOT_B, after.apiKey)).toBe(true);

    expect(eventsNamed(result, 'leak.identified')).toEqual([
      expect.objectContaining({ keyId: 'billing-api', slot: SLOT_B, which: 'current', reason: 'leak' }),
    ]);
    expect(eventsNamed(result, 'key.succeeded')).toEqual([
      expect.objectContaining({ keyId: 'billing-api', rolledKeyId: SLOT_B }),
    ]);
    const report = JSON.parse(result.stdout.trimEnd().split('\n').at(-2) ?? '{}') as {
      leak?: { proofs?: unknown[] };
    };
    expect(report.leak?.proofs).toEqual([
      expect.objectContaining({
        keyId: 'billing-api',
        slot: SLOT_B,
        verdict: 'refused',
        rotation: 'rotated',
      }),
    ]);
    expectNotLeaked([result], cli.emulator.state.mintedSecrets());
  });

  it('a value no entry holds rotates nothing and exits 4, audited leak.unmatched', async () => {
    await cli.writePolicy();
    expect((await cli.run(['run', '-p', 'policy.yaml'])).code).toBe(0);
    const unrelated = cli.emulator.state.currentSecret(SLOT_A);
    const result = await cli.run(
      ['rotate', '-p', 'policy.yaml', '--leaked-secret-stdin', '--reason', 'leak'],
      { stdin: unrelated },
    );
    expect(result.code).toBe(4);
    expect(result.stderr).toContain(
      `no policy entry holds this value (fingerprint ${fingerprintOf(unrelated)})`,
    );
    expect(eventsNamed(result, 'leak.unmatched')).toEqual([
      expect.objectContaining({ fingerprint: fingerprintOf(unrelated), searched: 6, unread: [] }),
    ]);
    expect(eventsNamed(result, 'run.started')).toEqual([]);
    expect(cli.emulator.state.totalRolls()).toBe(3);
  });

  it('a leaked value that still works after the rotation is alerted critical (KR_LEAK_STILL_ALIVE) and exits 1', async () => {
    await cli.writePolicy();
    expect((await cli.run(['run', '-p', 'policy.yaml'])).code).toBe(0);
    // Someone stored another key's secret (slot A, in no entry of this policy) where billing's belongs.
    const foreign = cli.emulator.state.currentSecret(SLOT_A);
    const files = await openFileBackend(cli.secretsDir);
    try {
      await files.writeSecret(TARGETS.key_demo_billing, {
        secret: new Secret(foreign),
        keyId: 'key_demo_billing',
        organizationId: ORG,
        rotationId: 'by-hand',
        rotatedAt: new Date().toISOString(),
      });
    } finally {
      await files.close();
    }
    const result = await cli.run(['rotate', '-p', 'policy.yaml', '--leaked-secret-stdin'], {
      stdin: foreign,
    });
    expect(result.code).toBe(1);
    expect(result.lastLine).toBe('rotated 1, failed 0, skipped 0');
    expect(eventsNamed(result, 'leak.still-alive')).toEqual([
      expect.objectContaining({
        keyId: 'key_demo_billing',
        fingerprint: fingerprintOf(foreign),
        rotation: 'rotated',
      }),
    ]);
    const alerts = cli.receiver.requests
      .map((r) => r.raw)
      .filter((raw) => raw.includes('KR_LEAK_STILL_ALIVE'));
    expect(alerts).toHaveLength(1);
    expect(alerts[0]).toContain('critical');
    expect(result.stdout).toContain('STILL WORKS');
    expectNotLeaked([result], cli.emulator.state.mintedSecrets());
  });

  it('a value that is only the previous one and already dead rolls nothing: proven dead, as the daemon decides (issue 18)', async () => {
    await cli.writePolicy();
    expect((await cli.run(['run', '-p', 'policy.yaml'])).code).toBe(0);
    const old = await storedSecret(cli.secretsDir, 'key_demo_billing');
    expect(
      (
        await cli.run([
          'rotate',
          '-p',
          'policy.yaml',
          '--key',
          'key_demo_billing',
          '--reason',
          'manual',
          '--force',
        ])
      ).code,
    ).toBe(0);
    expect(cli.emulator.state.rollCount('key_demo_billing')).toBe(2);

    const result = await cli.run(
      ['rotate', '-p', 'policy.yaml', '--leaked-secret-stdin', '--reason', 'leak', '--actor', 'alice'],
      { stdin: old },
    );
    expect(result.code, result.stderr).toBe(0);
    expect(cli.emulator.state.rollCount('key_demo_billing')).toBe(2);
    expect(result.lastLine).toBe('rotated 0, failed 0, skipped 0');
    expect(eventsNamed(result, 'leak.identified')).toEqual([
      expect.objectContaining({ keyId: 'key_demo_billing', which: 'previous' }),
    ]);
    expect(eventsNamed(result, 'leak.proven-dead')).toEqual([
      expect.objectContaining({ keyId: 'key_demo_billing', fingerprint: fingerprintOf(old), status: 401 }),
    ]);
    expect(result.stdout).toContain(
      `leaked value ${fingerprintOf(old)}: key_demo_billing proven dead: the API refused it (401); it was already rotated away, so nothing was rotated`,
    );
    expectNotLeaked([result], cli.emulator.state.mintedSecrets());
  });

  it('refuses --key/--org/--all and a reason other than leak or compromise (exit 2), before reading anything', async () => {
    await cli.writePolicy();
    const withKey = await cli.run(
      ['rotate', '-p', 'policy.yaml', '--leaked-secret-stdin', '--key', 'key_demo_billing'],
      { stdin: 'whatever-value-1234' },
    );
    expect(withKey.code).toBe(2);
    expect(withKey.stderr).toContain('leave out --key, --org and --all');
    const manual = await cli.run(
      ['rotate', '-p', 'policy.yaml', '--leaked-secret-stdin', '--reason', 'manual'],
      { stdin: 'whatever-value-1234' },
    );
    expect(manual.code).toBe(2);
    expect(manual.stderr).toContain('--reason must be leak or compromise');
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });
});
