// `keyroll status`, `plan` and `resume` show text read from a backend (a lock owner, an intent
// marker, a failure record: tags and metadata that others may write) with its control characters
// escaped (issue 27, finding 4). Raw, cursor-up and erase-line let such a string rewrite the line
// above it: here a lock owner that would erase its own row and print a clean one in its place.
import { describe, expect, it } from 'vitest';
import { TARGETS, openFileBackend, useCliFixture } from './harness.ts';
import { rawControls } from '../support/raw-controls.ts';

const cli = useCliFixture();
const ESC = '\u001b';
/** Back to the start of the row, up one line, erase it, and a row that reads as nothing held. */
const FORGED_OWNER = `x\r${ESC}[1A${ESC}[2Kkey_demo_billing  org_demo_acme  never  -  no  -  -  -`;
/** A one-character CSI (U+009B) and an OSC title sequence ended by BEL. */
const C1_OWNER = `gone\u009b2J${ESC}]0;pwned\u0007host`;
/** A right-to-left override: `KR_` then text shown reversed. */
const BIDI_CODE = 'KR_\u202eDELIAF';

async function seedHostileBookkeeping(): Promise<void> {
  await cli.writePolicy();
  const backend = await openFileBackend(cli.secretsDir);
  await backend.acquireLock(TARGETS.key_demo_billing, {
    owner: FORGED_OWNER,
    rotationId: 'r-lock',
    ttlMs: 15 * 60_000,
  });
  await backend.setIntent(TARGETS.key_demo_search, {
    rotationId: 'r-dead',
    keyId: 'key_demo_search',
    owner: C1_OWNER,
    startedAt: '2026-01-05T03:00:01.000Z',
  });
  await backend.recordFailure(TARGETS.key_demo_ingest, {
    rotationId: 'r-fail',
    step: 'roll',
    errorCode: BIDI_CODE,
    at: '2026-01-05T03:00:02.000Z',
    consecutive: 6,
    firstAt: '2026-01-01T03:00:00.000Z',
    quarantinedAt: '2026-01-05T03:00:02.000Z',
  });
}

describe('text from a backend reaches the terminal escaped', () => {
  it('status -o table: the forged lock owner shows its escapes and cannot erase its row', async () => {
    await seedHostileBookkeeping();
    const result = await cli.run(['status', '-p', 'policy.yaml', '-o', 'table']);
    expect(result.code).toBe(0);
    expect(rawControls(result.stdout)).toEqual([]);
    expect(result.stdout).toMatch(
      /^key_demo_billing\s.*x\\r\\u001b\[1A\\u001b\[2Kkey_demo_billing {2}org_demo_acme/m,
    );
    expect(result.stdout).toContain(
      'left by gone\\u009b2J\\u001b]0;pwned\\u0007host at 2026-01-05T03:00:01.000Z',
    );
    expect(result.stdout).toContain('KR_\\u202eDELIAF');
    // One row per key and the header: nothing was split or merged.
    expect(result.stdout.trimEnd().split('\n')).toHaveLength(4);
  });

  it('status -o json: DEL, C1 and bidi controls as \\u escapes, the same strings once parsed', async () => {
    await seedHostileBookkeeping();
    const result = await cli.run(['status', '-p', 'policy.yaml', '-o', 'json']);
    expect(rawControls(result.stdout)).toEqual([]);
    const keys = (
      JSON.parse(result.stdout) as {
        keys: { keyId: string; lock: { owner: string } | null; intent: { owner: string } | null }[];
      }
    ).keys;
    expect(keys.find((key) => key.keyId === 'key_demo_billing')?.lock?.owner).toBe(FORGED_OWNER);
    expect(keys.find((key) => key.keyId === 'key_demo_search')?.intent?.owner).toBe(C1_OWNER);
  });

  it('plan: the quarantine cell shows the failure record escaped', async () => {
    await seedHostileBookkeeping();
    const text = await cli.run(['plan', '-p', 'policy.yaml']);
    expect(rawControls(text.stdout)).toEqual([]);
    expect(text.stdout).toMatch(
      /^key_demo_ingest\s+org_demo_acme\s+held\s+QUARANTINED since .*last roll KR_\\u202eDELIAF/m,
    );
    const json = await cli.run(['plan', '-p', 'policy.yaml', '-o', 'json']);
    expect(rawControls(json.stdout)).toEqual([]);
  });

  it('resume: the lock holder named on stderr is escaped', async () => {
    await seedHostileBookkeeping();
    const result = await cli.run(['resume', '-p', 'policy.yaml', '--key', 'key_demo_billing']);
    expect(result.stderr).toContain('is held by x\\r\\u001b[1A\\u001b[2Kkey_demo_billing');
    expect(rawControls(result.stderr)).toEqual([]);
  });
});
