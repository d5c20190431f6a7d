// One roll at a time per key, across every runner (invariant 5): ten `keyroll run` processes
// start at once on the same policy and the same file backend. The emulator holds each runner's
// first API call (the credential check) until all ten have made it, so they reach the keys
// together instead of one after another. Every due key must be rolled exactly once, by exactly
// one runner, and stored where it works.
import { describe, expect, it } from 'vitest';
import { findSecrets } from '../support/secret-scan.ts';
import { checkAlerted, checkNoDoubleRoll, checkNotLost, recordCase, reportedRolls } from './record.ts';
import { runReportFromAudit } from './b-audit.ts';
import { OWNER_TOKEN } from './b-child.ts';
import { DEMO_KEYS, ORG, faultKey, faultPolicyYaml, openWorld, type FaultKey } from './b-world.ts';

const RUNNERS = 10;
const EXTRA_KEYS = ['key_fault_a', 'key_fault_b', 'key_fault_c', 'key_fault_d', 'key_fault_e'];
const KEYS: readonly FaultKey[] = [...DEMO_KEYS, ...EXTRA_KEYS].map((id, index) => faultKey(id, index));

/** A `sleep` for the emulator's delay faults that returns once `parties` callers are waiting. */
function barrier(parties: number, giveUpMs: number): { sleep: () => Promise<void>; arrived: () => number } {
  let arrived = 0;
  let open: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  // Never a deadlock: if a runner dies before its first call, the others go on after a while
  // and the arrival count tells the test the start was not simultaneous.
  const fallback = setTimeout(() => {
    open();
  }, giveUpMs);
  return {
    arrived: () => arrived,
    sleep: async () => {
      arrived++;
      if (arrived >= parties) {
        clearTimeout(fallback);
        open();
      }
      await gate;
    },
  };
}

describe('ten runners at once on one policy and one backend', () => {
  it('rolls each due key exactly once, stores it where it works, and the runners agree on the count', async (ctx) => {
    const start = barrier(RUNNERS, 60_000);
    const world = await openWorld({ sleep: start.sleep });
    try {
      for (const id of EXTRA_KEYS) world.emulator.state.addApiKey({ id, name: id, organizationId: ORG });
      await world.writeFile(
        'policy.yaml',
        faultPolicyYaml({
          baseUrl: world.emulator.url,
          alertUrl: `${world.receiver.url}/alerts`,
          keys: KEYS,
        }),
      );
      world.emulator.faults.inject('listProjects', { kind: 'delay', ms: 1 }, RUNNERS);

      const runs = await Promise.all(
        Array.from({ length: RUNNERS }, () =>
          world.run(['run', '-p', 'policy.yaml'], { killAfterMs: 120_000 }),
        ),
      );

      const keyIds = KEYS.map((key) => key.id);
      const copies = await Promise.all(
        KEYS.map(async (key) => ({ keyId: key.id, secrets: [await world.storedSecret(key)] })),
      );
      const lost = checkNotLost(copies, (keyId, secret) => world.emulator.state.isLiveSecret(keyId, secret));
      const leaks = findSecrets(world.haystacks(), [...world.emulator.state.mintedSecrets(), OWNER_TOKEN]);
      const reports = runs.map((run) => runReportFromAudit(run.events, keyIds));
      const alerts = checkAlerted(reports, world.alerts());
      const allEvents = runs.flatMap((run) => run.events);
      const rolls = checkNoDoubleRoll(
        keyIds.map((keyId) => ({
          keyId,
          emulatorRolls: world.emulator.state.rollCount(keyId),
          reportedRolls: reportedRolls(allEvents, keyId),
        })),
      );
      recordCase(ctx, {
        case: `${RUNNERS} runners at once, ${KEYS.length} due keys`,
        fault: `${RUNNERS} concurrent keyroll run`,
        backend: 'cli',
        step: 'lock',
        result: 'rotated',
        lost: lost.lost,
        leaked: leaks.leaked,
        alerted: alerts.alerted,
        failures: alerts.failures,
      });

      expect(start.arrived(), 'runners held at the start line together').toBe(RUNNERS);
      for (const run of runs) {
        // 0, or 3 for a runner that found every key it still had to handle locked by another.
        expect([0, 3], run.stderr).toContain(run.code);
        expect(run.summary, run.lastLine).toBeDefined();
        expect(run.summary?.failed).toBe(0);
        // Every runner accounts for every key: rotated it, found it locked, or found it done.
        expect((run.summary?.rotated ?? 0) + (run.summary?.skipped ?? 0)).toBe(KEYS.length);
        if (run.code === 3)
          expect(run.lastLine).toContain('aborted: every key in scope was locked by another runner');
      }
      // Exactly one roll per key, by exactly one runner, and the runners' counts add up.
      for (const keyId of keyIds) expect(world.emulator.state.rollCount(keyId), keyId).toBe(1);
      expect(runs.reduce((total, run) => total + (run.summary?.rotated ?? 0), 0)).toBe(KEYS.length);
      for (const keyId of keyIds) {
        const rotatedBy = runs.filter((run) =>
          run.events.some((event) => event.event === 'key.succeeded' && event.keyId === keyId),
        );
        expect(rotatedBy, `${keyId} rotated by`).toHaveLength(1);
      }
      expect(rolls.problems).toEqual([]);
      expect(lost.lostKeys).toEqual([]);
      for (const key of KEYS) {
        const state = await world.files.readState(key.target);
        expect(state.intent, `${key.id} intent`).toBeUndefined();
        expect(state.lock, `${key.id} lock`).toBeUndefined();
      }
      // The only alerts are the lock-contention notices of runners that found nothing left to do.
      expect(alerts.problems).toEqual([]);
      expect(
        world
          .alerts()
          .every((alert) => alert.keyId === undefined && alert.errorCode === 'KR_RUN_LOCK_CONTENTION'),
      ).toBe(true);
      expect(leaks.hits).toEqual([]);
    } finally {
      await world.close();
    }
    // Ten keyroll processes start on the same cores at once: the test waits for them as long as
    // its own start line (60 s) and kill switch (120 s) allow, not the suite's default 30 s.
  }, 150_000);
});
