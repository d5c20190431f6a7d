// Crash safety (invariant 6), as an operator meets it: keyroll runs as a child process, is
// SIGKILLed at a step boundary of its rotations, and the next `keyroll run` must find what the
// dead run left and repair it: every key usable, the intent marker cleared, the lock free, one
// recovery alert per interrupted rotation, no alert otherwise, the API's roll count matching what
// keyroll reports, and no minted secret in any output or alert.
//
// The pause points come from KEYROLL_TEST_PAUSE_AT (src/cli/common.ts). The window between the
// roll answer and the store has none on purpose (invariant 2): it is reached by making the
// emulator apply the roll and hold the answer, and killing keyroll while it waits.
//
// The repair takes two runs where the dead run left its lock (invariant 9): the first takes the
// lock over, and since a runner whose lock it took may still act (paused, its roll in flight), it
// never clears that runner's marker; it re-rolls a key whose stored secret is dead (keeping its
// own marker for one lock TTL) and leaves a working one alone. The next run, one TTL later,
// finds the markers of runners that can no longer act and clears them.
//
// Each boundary runs CRASH_ITERATIONS times, alternating two starting states: keys never
// rotated (nothing stored yet) and keys rotated ten minutes earlier (a working secret stored).
import { describe, expect, it } from 'vitest';
import { findSecrets } from '../support/secret-scan.ts';
import { checkAlerted, checkNoDoubleRoll, checkNotLost, recordCase, reportedRolls } from './record.ts';
import { runReportFromAudit } from './b-audit.ts';
import { OWNER_TOKEN, type ChildResult } from './b-child.ts';
import { waitFor } from '../support/wait-for.ts';
import { crashIterations } from './b-budget.ts';
import {
  DEMO_KEYS,
  faultKey,
  faultPolicyYaml,
  openWorld,
  type FaultKey,
  type FaultWorld,
} from './b-world.ts';

interface Boundary {
  /** Case label. */
  name: string;
  /** The rotation step the kill interrupts. */
  step: 'preflight' | 'lock' | 'intent' | 'roll' | 'store' | 'verify' | 'finish';
  /** KEYROLL_TEST_PAUSE_AT value; absent for the roll in flight (the emulator holds the answer). */
  pauseAt?: string;
  /** The API applied one roll per key before the kill. */
  rolledAtKill: boolean;
  /** The kill leaves the intent marker (and so a recovery to do). */
  intentLeft: boolean;
  /** The kill leaves the key lock (the next run waits out its TTL). */
  lockLeft: boolean;
}

const BOUNDARIES: readonly Boundary[] = [
  {
    name: 'preflight',
    step: 'preflight',
    pauseAt: 'preflight',
    rolledAtKill: false,
    intentLeft: false,
    lockLeft: false,
  },
  // The pause is before the lock is taken.
  { name: 'lock', step: 'lock', pauseAt: 'lock', rolledAtKill: false, intentLeft: false, lockLeft: false },
  // Lock held, intent not yet written.
  {
    name: 'intent',
    step: 'intent',
    pauseAt: 'intent',
    rolledAtKill: false,
    intentLeft: false,
    lockLeft: true,
  },
  {
    name: 'roll, request not sent',
    step: 'roll',
    pauseAt: 'roll',
    rolledAtKill: false,
    intentLeft: true,
    lockLeft: true,
  },
  {
    name: 'roll in flight (applied, answer held)',
    step: 'roll',
    rolledAtKill: true,
    intentLeft: true,
    lockLeft: true,
  },
  {
    name: 'store done, before verify',
    step: 'store',
    pauseAt: 'store',
    rolledAtKill: true,
    intentLeft: true,
    lockLeft: true,
  },
  { name: 'verify', step: 'verify', pauseAt: 'verify', rolledAtKill: true, intentLeft: true, lockLeft: true },
  { name: 'finish', step: 'finish', pauseAt: 'finish', rolledAtKill: true, intentLeft: true, lockLeft: true },
];

const KEYS: readonly FaultKey[] = DEMO_KEYS.map((id, index) => faultKey(id, index));
/**
 * Short, so the repair run can take over the dead run's locks without a long wait, yet long enough
 * to cover one roll attempt and the write (invariant 9; `validate` refuses less): 1.2 s + 0.2 s of
 * API timeouts, two 200 ms store backoffs, 100 ms of clock skew.
 */
const LOCK_TTL_MS = 2_000;
const CLOCK_SKEW_MS = 100;
const TIMEOUTS = { headersMs: 1_200, bodyMs: 200 };
const ITERATIONS = crashIterations();
type StartState = 'never rotated' | 'rotated 10 min ago';

interface KillReport {
  result: ChildResult;
  /** Per key: the API's roll count at the kill minus before the crash run. */
  rollsAtKill: Map<string, number>;
  intentKeys: string[];
  lockedKeys: string[];
  /** Per intent key: whether the stored secret still worked at the kill (recovery without a roll). */
  storedWorksAtKill: Map<string, boolean>;
}

async function crashAt(world: FaultWorld, boundary: Boundary): Promise<KillReport> {
  const before = new Map(KEYS.map((key) => [key.id, world.emulator.state.rollCount(key.id)]));
  if (!boundary.pauseAt)
    world.emulator.faults.inject('roll', { kind: 'failAfterApply', then: 'hang' }, KEYS.length);
  const child = world.spawn(
    [
      'rotate',
      '--all',
      '--reason',
      'manual',
      '--force',
      '--concurrency',
      String(KEYS.length),
      '-p',
      'policy.yaml',
    ],
    {
      env: boundary.pauseAt ? { KEYROLL_TEST_PAUSE_AT: boundary.pauseAt } : {},
      killAfterMs: 60_000,
    },
  );
  if (boundary.pauseAt) {
    // Every key of the run reaches the pause point (they run side by side).
    await child.waitForStderr(`keyroll: paused at ${boundary.pauseAt}\n`, KEYS.length);
  } else {
    await waitFor(
      () => KEYS.every((key) => world.emulator.state.rollCount(key.id) > (before.get(key.id) ?? 0)),
      'every held roll applied',
    );
  }
  const result = await child.kill();
  const rollsAtKill = new Map(
    KEYS.map((key) => [key.id, world.emulator.state.rollCount(key.id) - (before.get(key.id) ?? 0)]),
  );
  const intentKeys: string[] = [];
  const lockedKeys: string[] = [];
  const storedWorksAtKill = new Map<string, boolean>();
  for (const key of KEYS) {
    const state = await world.files.readState(key.target);
    if (state.lock) lockedKeys.push(key.id);
    if (!state.intent) continue;
    intentKeys.push(key.id);
    const stored = await world.storedSecret(key);
    storedWorksAtKill.set(key.id, stored !== undefined && world.emulator.state.isLiveSecret(key.id, stored));
  }
  return { result, rollsAtKill, intentKeys, lockedKeys, storedWorksAtKill };
}

/** Waits until every lock the dead run left has expired, so the repair run may take it over. */
async function waitOutLocks(world: FaultWorld): Promise<void> {
  let latest = 0;
  for (const key of KEYS) {
    const lock = (await world.files.readState(key.target)).lock;
    if (lock) latest = Math.max(latest, Date.parse(lock.expiresAt));
  }
  const waitMs = latest - Date.now() + CLOCK_SKEW_MS + 50;
  if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
}

describe('SIGKILL at every step boundary, then `keyroll run` repairs', () => {
  for (const boundary of BOUNDARIES) {
    describe(`killed at ${boundary.name}`, () => {
      for (let iteration = 1; iteration <= ITERATIONS; iteration++) {
        const start: StartState = iteration % 2 === 1 ? 'never rotated' : 'rotated 10 min ago';
        it(`#${iteration} (${start}): every key usable, intent cleared, one alert per recovery`, async (ctx) => {
          const world = await openWorld();
          try {
            await world.writeFile(
              'policy.yaml',
              faultPolicyYaml({
                baseUrl: world.emulator.url,
                alertUrl: `${world.receiver.url}/alerts`,
                keys: KEYS,
                lockTtl: `${LOCK_TTL_MS}ms`,
                clockSkew: `${CLOCK_SKEW_MS}ms`,
                ...TIMEOUTS,
              }),
            );
            if (start === 'rotated 10 min ago') {
              for (const key of KEYS) await world.seedRotated(key, new Date(Date.now() - 10 * 60_000));
            }

            const beforeCrash = new Map(KEYS.map((key) => [key.id, world.emulator.state.rollCount(key.id)]));
            const kill = await crashAt(world, boundary);
            await waitOutLocks(world);
            const first = await world.run(['run', '-p', 'policy.yaml'], { killAfterMs: 60_000 });
            await new Promise((resolve) => setTimeout(resolve, LOCK_TTL_MS + 50));
            const second = await world.run(['run', '-p', 'policy.yaml'], { killAfterMs: 60_000 });
            const repairs = [first, second];
            const repairEvents = repairs.flatMap((run) => run.events);

            // The four questions, answered and recorded before asserting.
            const copies = await Promise.all(
              KEYS.map(async (key) => ({ keyId: key.id, secrets: [await world.storedSecret(key)] })),
            );
            const lost = checkNotLost(copies, (keyId, secret) =>
              world.emulator.state.isLiveSecret(keyId, secret),
            );
            const leaks = findSecrets(world.haystacks(), [
              ...world.emulator.state.mintedSecrets(),
              OWNER_TOKEN,
            ]);
            const alerts = world.alerts();
            const recoveryAlerts = (keyId: string): number =>
              alerts.filter((alert) => alert.keyId === keyId && alert.step === 'recovery').length;
            const repairAlerts = checkAlerted(
              repairs.map((run) =>
                runReportFromAudit(
                  run.events,
                  KEYS.map((key) => key.id),
                ),
              ),
              alerts,
            );
            // Every roll of the case, the dead run's included, against what the two runs' audit
            // accounts for. One roll no run can account for: applied in flight for a key that had
            // nothing stored, so no stored secret can show that it died; the test counts that one
            // itself from the emulator.
            const unaccountable = !boundary.pauseAt && start === 'never rotated' ? 1 : 0;
            const rolls = checkNoDoubleRoll(
              KEYS.map((key) => ({
                keyId: key.id,
                emulatorRolls: world.emulator.state.rollCount(key.id) - (beforeCrash.get(key.id) ?? 0),
                reportedRolls:
                  reportedRolls([...kill.result.events, ...repairEvents], key.id) + unaccountable,
              })),
            );
            const interrupted = kill.intentKeys.length;
            recordCase(ctx, {
              case: `crash at ${boundary.name} #${iteration} (${start})`,
              fault: `SIGKILL at ${boundary.name}`,
              backend: 'cli',
              step: boundary.step,
              result: 'aborted',
              lost: lost.lost,
              leaked: leaks.leaked,
              // An interrupted rotation is a failure the dead run could not report: the repair run's
              // recovery alert is its alert.
              alerted: kill.intentKeys.filter((id) => recoveryAlerts(id) === 1).length + repairAlerts.alerted,
              failures: interrupted + repairAlerts.failures,
            });

            // The kill hit where it was meant to.
            expect(kill.result.signal).toBe('SIGKILL');
            for (const key of KEYS)
              expect(kill.rollsAtKill.get(key.id), `${key.id} rolls before the kill`).toBe(
                boundary.rolledAtKill ? 1 : 0,
              );
            expect(kill.intentKeys).toEqual(boundary.intentLeft ? KEYS.map((key) => key.id) : []);
            expect(kill.lockedKeys).toEqual(boundary.lockLeft ? KEYS.map((key) => key.id) : []);

            // The repair runs finished cleanly.
            for (const run of repairs) {
              expect(run.code, run.stderr).toBe(0);
              expect(run.stderr).toBe('');
              expect(run.summary).toMatchObject({ failed: 0, aborted: false });
            }
            const touched = start === 'never rotated' ? KEYS.length : kill.intentKeys.length;
            expect((first.summary?.rotated ?? 0) + (second.summary?.rotated ?? 0)).toBe(touched);

            // Not lost; no intent left behind, no live lock.
            expect(lost.lostKeys).toEqual([]);
            for (const key of KEYS) {
              const state = await world.files.readState(key.target);
              expect(state.intent, `${key.id} intent`).toBeUndefined();
              // A key that was not due is not locked by the repair run, so the dead run's lock may
              // stay behind; it is stale by then, and the next runner that needs it takes it over.
              if (state.lock)
                expect(Date.parse(state.lock.expiresAt), `${key.id} lock expiry`).toBeLessThanOrEqual(
                  Date.now(),
                );
            }

            // Alerted: exactly one recovery alert per interrupted rotation, saying which repair it was.
            for (const key of KEYS) {
              const mine = alerts.filter((alert) => alert.keyId === key.id);
              if (!kill.intentKeys.includes(key.id)) {
                expect(mine, `${key.id} alerts`).toEqual([]);
                continue;
              }
              const expectedCode =
                kill.storedWorksAtKill.get(key.id) === true ? 'KR_RECOVERED_INTENT' : 'KR_RECOVERED_REROLL';
              expect(mine, `${key.id} alerts`).toEqual([
                expect.objectContaining({ step: 'recovery', errorCode: expectedCode, severity: 'warning' }),
              ]);
            }
            expect(repairAlerts.problems).toEqual([]);

            // No double roll, no leak.
            expect(rolls.problems).toEqual([]);
            expect(leaks.hits).toEqual([]);
          } finally {
            await world.close();
          }
          // A kill, the locks waited out and two repair runs (each with its own 60 s kill switch):
          // on loaded cores that outlasts the suite's 30 s default without anything being wrong.
        }, 150_000);
      }
    });
  }
});
