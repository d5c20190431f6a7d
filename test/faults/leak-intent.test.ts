// A leak rotation killed after its intent marker and before its roll (invariant 6): the stored
// secret still works because it IS the leaked value (the roll never happened). Recovery must not
// take "it works" for "nothing to do": the marker says it answered a leak, so the next plain
// `keyroll run` re-rolls at once as a leak and proves the leaked value dead. A leak marker whose
// run stored its own secret before dying is recovered as any other (crash.test.ts covers those),
// and so is one whose stored value changed since its marker: the operator answered the leak by
// hand (a roll in the dashboard, the new secret written into the destination), and that working
// value is not the leaked one (the marker records the fingerprint of the value stored then).
//
// As in crash.test.ts the dead run leaves its lock: the first repair run takes it over (the dead
// runner may still act, so its own marker is held one lock TTL), and a second run one TTL later
// clears what is left.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findSecrets } from '../support/secret-scan.ts';
import { checkAlerted, checkNotLost, recordCase } from './record.ts';
import { runReportFromAudit } from './b-audit.ts';
import { OWNER_TOKEN, type ChildResult } from './b-child.ts';
import { DEMO_KEYS, ORG, faultKey, faultPolicyYaml, openWorld, type FaultWorld } from './b-world.ts';

const KEY = faultKey(DEMO_KEYS[0], 0);
const LOCK_TTL_MS = 2_000;
const CLOCK_SKEW_MS = 100;

/** `rotate --reason leak` paused at its roll (the marker written, no roll sent) and SIGKILLed. */
async function killLeakAtRoll(world: FaultWorld): Promise<{
  leaked: string;
  rollsBefore: number;
  killed: ChildResult;
  markerLeft: boolean;
  rollsAtKill: number;
}> {
  await world.writeFile(
    'policy.yaml',
    faultPolicyYaml({
      baseUrl: world.emulator.url,
      alertUrl: `${world.receiver.url}/alerts`,
      keys: [KEY],
      lockTtl: `${LOCK_TTL_MS}ms`,
      clockSkew: `${CLOCK_SKEW_MS}ms`,
      headersMs: 1_200,
      bodyMs: 200,
    }),
  );
  // A working secret, rotated 10 minutes ago (inside the minimum interval, not due): the value that leaked.
  await world.seedRotated(KEY, new Date(Date.now() - 10 * 60_000));
  const leaked = await world.storedSecret(KEY);
  if (leaked === undefined) throw new Error('seeded secret missing');
  const rollsBefore = world.emulator.state.rollCount(KEY.id);

  const child = world.spawn(['rotate', '--key', KEY.id, '--reason', 'leak', '-p', 'policy.yaml'], {
    env: { KEYROLL_TEST_PAUSE_AT: 'roll' },
    killAfterMs: 60_000,
  });
  await child.waitForStderr('keyroll: paused at roll\n');
  const killed = await child.kill();
  const atKill = await world.files.readState(KEY.target);
  const rollsAtKill = world.emulator.state.rollCount(KEY.id) - rollsBefore;
  const lock = atKill.lock;
  if (lock) {
    const waitMs = Date.parse(lock.expiresAt) - Date.now() + CLOCK_SKEW_MS + 50;
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
  }
  return { leaked, rollsBefore, killed, markerLeft: atKill.intent?.rotationId !== undefined, rollsAtKill };
}

/** Two plain `keyroll run`s a lock TTL apart, as in crash.test.ts. */
async function repairRuns(world: FaultWorld): Promise<Awaited<ReturnType<FaultWorld['run']>>[]> {
  const first = await world.run(['run', '-p', 'policy.yaml'], { killAfterMs: 60_000 });
  await new Promise((resolve) => setTimeout(resolve, LOCK_TTL_MS + 50));
  const second = await world.run(['run', '-p', 'policy.yaml'], { killAfterMs: 60_000 });
  return [first, second];
}

describe('a leak rotation SIGKILLed after its intent marker, before its roll', () => {
  it('`rotate --reason leak` killed at the roll: the next `keyroll run` kills the leaked value', async (ctx) => {
    const world = await openWorld();
    try {
      const { leaked, rollsBefore, killed, markerLeft, rollsAtKill } = await killLeakAtRoll(world);
      const repairs = await repairRuns(world);

      const leakedAlive = world.emulator.state.isLiveSecret(KEY.id, leaked);
      const lost = checkNotLost([{ keyId: KEY.id, secrets: [await world.storedSecret(KEY)] }], (id, secret) =>
        world.emulator.state.isLiveSecret(id, secret),
      );
      const leaks = findSecrets(world.haystacks(), [...world.emulator.state.mintedSecrets(), OWNER_TOKEN]);
      const alerts = world.alerts().filter((alert) => alert.keyId === KEY.id);
      const recoveryAlerts = alerts.filter((alert) => alert.step === 'recovery');
      const repairAlerts = checkAlerted(
        repairs.map((run) => runReportFromAudit(run.events, [KEY.id])),
        world.alerts(),
      );
      recordCase(ctx, {
        case: 'leak intent left, roll not sent (leak)',
        fault: 'SIGKILL at roll of rotate --reason leak',
        backend: 'cli',
        step: 'roll',
        result: 'aborted',
        lost: lost.lost,
        leaked: leaks.leaked,
        // The interrupted leak is a failure the dead run could not report: it counts as alerted
        // only when the repair killed the leaked value and said so once.
        alerted: (!leakedAlive && recoveryAlerts.length === 1 ? 1 : 0) + repairAlerts.alerted,
        failures: 1 + repairAlerts.failures,
      });

      // The kill hit after the marker, before the roll request.
      expect(killed.signal).toBe('SIGKILL');
      expect(markerLeft).toBe(true);
      expect(rollsAtKill).toBe(0);

      for (const run of repairs) {
        expect(run.code, run.stderr).toBe(0);
        expect(run.summary).toMatchObject({ failed: 0, aborted: false });
      }
      // The leak is answered: the leaked value is dead, the key rolled once, a working secret stored.
      expect(leakedAlive, 'the leaked value is still live').toBe(false);
      expect(world.emulator.state.rollCount(KEY.id) - rollsBefore).toBe(1);
      expect(lost.lostKeys).toEqual([]);
      expect((await world.files.readState(KEY.target)).intent).toBeUndefined();
      expect(recoveryAlerts).toEqual([
        expect.objectContaining({ errorCode: 'KR_RECOVERED_LEAK', severity: 'warning' }),
      ]);
      expect(repairAlerts.problems).toEqual([]);
      expect(repairs.flatMap((run) => run.events).filter((event) => event.event === 'key.recovered')).toEqual(
        [expect.objectContaining({ result: 'rerolled', why: 'leak-not-rolled', leakedValueDead: true })],
      );
      expect(leaks.hits).toEqual([]);
    } finally {
      await world.close();
    }
    // Three child keyrolls on a shared 2-core machine: the time is the children's start-up, not a wait.
  }, 180_000);

  it('killed at the roll, then the operator writes a different working value by hand: recovered as any marker, not re-rolled', async (ctx) => {
    const world = await openWorld();
    try {
      const { leaked, killed, markerLeft, rollsAtKill } = await killLeakAtRoll(world);
      // The operator answers the leak by hand: a roll in the dashboard, the new secret written
      // into the destination in the key's shape (the runbook's escrow restore writes the same way).
      const byHand = world.emulator.state.rollKey(KEY.id);
      const rollsAfterHand = world.emulator.state.rollCount(KEY.id);
      await writeFile(
        join(world.dir, 'secrets', KEY.target.path),
        `${JSON.stringify({ apiKey: byHand, keyId: KEY.id, organizationId: ORG, rotatedAt: new Date().toISOString() })}\n`,
        { mode: 0o600 },
      );
      const repairs = await repairRuns(world);

      const lost = checkNotLost([{ keyId: KEY.id, secrets: [await world.storedSecret(KEY)] }], (id, secret) =>
        world.emulator.state.isLiveSecret(id, secret),
      );
      const leaks = findSecrets(world.haystacks(), [...world.emulator.state.mintedSecrets(), OWNER_TOKEN]);
      const recoveryAlerts = world
        .alerts()
        .filter((alert) => alert.keyId === KEY.id && alert.step === 'recovery');
      const repairAlerts = checkAlerted(
        repairs.map((run) => runReportFromAudit(run.events, [KEY.id])),
        world.alerts(),
      );
      const keptByHand = (await world.storedSecret(KEY)) === byHand;
      recordCase(ctx, {
        case: 'leak intent left, roll not sent, value restored by hand',
        fault: 'SIGKILL at roll of rotate --reason leak, then a different working value written by hand',
        backend: 'cli',
        step: 'roll',
        result: 'aborted',
        lost: lost.lost,
        leaked: leaks.leaked,
        // The interrupted run counts as alerted when the repair kept the hand-written value and said so once.
        alerted: (keptByHand && recoveryAlerts.length === 1 ? 1 : 0) + repairAlerts.alerted,
        failures: 1 + repairAlerts.failures,
      });

      expect(killed.signal).toBe('SIGKILL');
      expect(markerLeft).toBe(true);
      expect(rollsAtKill).toBe(0);
      for (const run of repairs) {
        expect(run.code, run.stderr).toBe(0);
        expect(run.summary).toMatchObject({ failed: 0, aborted: false });
      }
      // The hand-written value is kept: no roll by keyroll, the marker cleared as working.
      expect(world.emulator.state.rollCount(KEY.id)).toBe(rollsAfterHand);
      expect(keptByHand, 'the value written by hand was replaced').toBe(true);
      expect(world.emulator.state.isLiveSecret(KEY.id, byHand)).toBe(true);
      expect(world.emulator.state.isLiveSecret(KEY.id, leaked)).toBe(false);
      expect(lost.lostKeys).toEqual([]);
      expect((await world.files.readState(KEY.target)).intent).toBeUndefined();
      expect(recoveryAlerts).toEqual([
        expect.objectContaining({ errorCode: 'KR_RECOVERED_INTENT', severity: 'warning' }),
      ]);
      expect(repairAlerts.problems).toEqual([]);
      expect(repairs.flatMap((run) => run.events).filter((event) => event.event === 'key.recovered')).toEqual(
        [expect.objectContaining({ result: 'stored-secret-works' })],
      );
      expect(leaks.hits).toEqual([]);
    } finally {
      await world.close();
    }
  }, 180_000);
});
