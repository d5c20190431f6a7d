// `keyroll resume`, and how `status` and `plan` show a key held back by its failure streak, as
// child processes against the emulator and a file backend.
import { describe, expect, it } from 'vitest';
import type { FailureRecord } from '../../src/backends/types.ts';
import { TARGETS, eventsNamed, openFileBackend, useCliFixture } from './harness.ts';

const cli = useCliFixture();

const QUARANTINED: FailureRecord = {
  rotationId: 'r-fifth',
  step: 'preflight',
  errorCode: 'KR_BACKEND_DENIED',
  at: '2026-01-05T03:00:02.000Z',
  consecutive: 5,
  firstAt: '2026-01-04T03:00:02.000Z',
  quarantinedAt: '2026-01-05T03:00:02.000Z',
  lastAlertedAt: '2026-01-05T03:00:02.000Z',
};

interface StreakKey {
  keyId: string;
  failureStreak: { consecutive: number; quarantinedAt: string | null; lastErrorCode: string } | null;
}

describe('keyroll resume', () => {
  it('status and plan say a key is quarantined, why and since when; resume lifts it (audited with the actor) and run rotates it', async () => {
    await cli.writePolicy();
    const backend = await openFileBackend(cli.secretsDir);
    await backend.recordFailure(TARGETS.key_demo_billing, QUARANTINED);

    const status = await cli.run(['status', '-p', 'policy.yaml', '-o', 'json']);
    const billing = (JSON.parse(status.stdout) as { keys: StreakKey[] }).keys.find(
      (k) => k.keyId === 'key_demo_billing',
    );
    expect(billing?.failureStreak).toMatchObject({
      consecutive: 5,
      quarantinedAt: QUARANTINED.quarantinedAt,
      lastErrorCode: 'KR_BACKEND_DENIED',
    });
    const table = await cli.run(['status', '-p', 'policy.yaml', '-o', 'table']);
    expect(table.stdout).toMatch(
      /^key_demo_billing\s.*QUARANTINED since 2026-01-05T03:00:02\.000Z \(5 failures since 2026-01-04T03:00:02\.000Z, last preflight KR_BACKEND_DENIED; keyroll resume\)$/m,
    );
    const plan = await cli.run(['plan', '-p', 'policy.yaml']);
    expect(plan.stdout).toMatch(
      /^key_demo_billing\s+\S+\s+held\s+QUARANTINED since 2026-01-05T03:00:02\.000Z/m,
    );

    // A scheduled run leaves it alone and says why.
    const held = await cli.run(['run', '-p', 'policy.yaml', '--log-format', 'json']);
    expect(eventsNamed(held, 'key.skipped').find((e) => e.keyId === 'key_demo_billing')).toMatchObject({
      why: 'quarantined',
      quarantinedAt: QUARANTINED.quarantinedAt,
    });

    const resumed = await cli.run([
      'resume',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_billing',
      '--actor',
      'alice',
      '--ticket',
      'INC-7',
    ]);
    expect(resumed.code).toBe(0);
    expect(resumed.stderr).toMatch(
      /quarantine \(since 2026-01-05T03:00:02\.000Z\) lifted after 5 consecutive failures/,
    );
    expect(eventsNamed(resumed, 'key.resumed')).toEqual([
      expect.objectContaining({
        keyId: 'key_demo_billing',
        actor: 'alice',
        ticket: 'INC-7',
        consecutive: 5,
      }) as unknown,
    ]);
    expect((await backend.readState(TARGETS.key_demo_billing)).lastFailure).toMatchObject({ consecutive: 0 });

    const after = await cli.run(['run', '-p', 'policy.yaml', '--log-format', 'json']);
    expect(eventsNamed(after, 'key.succeeded').map((e) => e.keyId)).toContain('key_demo_billing');
  });

  it('says there is nothing to resume for a key without a streak, and exits 2 for an unknown key', async () => {
    await cli.writePolicy();
    const nothing = await cli.run([
      'resume',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_search',
      '--actor',
      'bob',
    ]);
    expect(nothing.code).toBe(0);
    expect(nothing.stderr).toMatch(/neither quarantined nor backing off/);
    expect(eventsNamed(nothing, 'key.resumed')).toEqual([]);
    const unknown = await cli.run(['resume', '-p', 'policy.yaml', '--key', 'key_nope', '--actor', 'bob']);
    expect(unknown.code).toBe(2);
  });

  it('exits 3 and changes nothing while another runner holds the key lock', async () => {
    await cli.writePolicy();
    const backend = await openFileBackend(cli.secretsDir);
    await backend.recordFailure(TARGETS.key_demo_billing, QUARANTINED);
    await backend.acquireLock(TARGETS.key_demo_billing, {
      owner: 'other-host/4242/abcd',
      rotationId: 'r-lock',
      ttlMs: 15 * 60_000,
    });
    const busy = await cli.run([
      'resume',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_billing',
      '--actor',
      'carol',
    ]);
    expect(busy.code).toBe(3);
    expect(busy.stderr).toMatch(/held by other-host\/4242\/abcd/);
    expect((await backend.readState(TARGETS.key_demo_billing)).lastFailure).toMatchObject({ consecutive: 5 });
  });
});
