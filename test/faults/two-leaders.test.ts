// Two leaders at once (issue 30): two daemon replicas that both believe they hold the Lease, as a
// paused process resumed past its renew deadline or a clock running fast would make them. Here
// each replica is given a Lease of its own (a split brain the real election does not produce,
// which is the point: the Lease is not the fence). Both sweep the same policy and the same file
// backend at once, several times, and fire the same schedule; every due key must still be rolled
// exactly once, stored where it works, and no secret may reach the audit trail or an alert:
// the backend key lock (invariants 5 and 9) decides who rolls, not the Lease.
import { describe, expect, it } from 'vitest';
import type { ElectionTimings } from '../../src/leader/elector.ts';
import { findSecrets } from '../support/secret-scan.ts';
import { MemoryLeaseStore } from '../support/memory-lease-store.ts';
import { keyYaml, OWNER_TOKEN, startDaemonBench } from '../support/daemon-bench.ts';
import { checkNoDoubleRoll, checkNotLost, recordCase, reportedRolls } from './record.ts';

const KEYS = ['key_demo_billing', 'key_demo_search', 'key_demo_ingest'];
const TIMINGS: ElectionTimings = { leaseDurationMs: 1_000, renewDeadlineMs: 600, retryPeriodMs: 50 };

describe('two leaders at once', () => {
  it('two replicas that both hold "the" Lease sweep the same due keys together: each key is rolled once, stored, and nothing leaks', async (ctx) => {
    const bench = await startDaemonBench();
    try {
      // Never rotated: due at the first sweep of whichever replica leads.
      await bench.writePolicy(KEYS.map((id) => keyYaml(id, 'maxAge: 2h')).join(''));
      const [a, b] = await Promise.all(
        ['keyroll-a', 'keyroll-b'].map((identity) =>
          bench.start({
            concurrency: 4,
            leaderElection: { store: new MemoryLeaseStore(), identity, timings: TIMINGS },
          }),
        ),
      );
      if (a === undefined || b === undefined) throw new Error('two daemons');
      const deadline = Date.now() + 10_000;
      while (bench.events('leader.elected').length < 2 && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 10));
      // Both lead, and both are asked to sweep at the same moment, three times over.
      for (let round = 0; round < 3; round++) await Promise.all([a.sweep(), b.sweep()]);
      await Promise.all([a.idle(), b.idle()]);

      const copies = await Promise.all(
        KEYS.map(async (keyId) => ({ keyId, secrets: [await bench.storedSecret(keyId)] })),
      );
      const lost = checkNotLost(copies, (keyId, secret) => bench.emulator.state.isLiveSecret(keyId, secret));
      const leaks = findSecrets(
        [...bench.audit.lines, ...bench.alerter.alerts.map((alert) => JSON.stringify(alert))],
        [...bench.emulator.state.mintedSecrets(), OWNER_TOKEN],
      );
      const records = bench.audit.events as unknown as Record<string, unknown>[];
      const rolls = checkNoDoubleRoll(
        KEYS.map((keyId) => ({
          keyId,
          emulatorRolls: bench.emulator.state.rollCount(keyId),
          reportedRolls: reportedRolls(records, keyId),
        })),
      );
      const failures = bench.events('key.failed').length;
      recordCase(ctx, {
        case: `two leaders at once, ${String(KEYS.length)} due keys`,
        fault: 'split brain: both replicas hold a Lease',
        backend: 'file',
        step: 'lock',
        result: 'rotated',
        lost: lost.lost,
        leaked: leaks.leaked,
        alerted: bench.alerter.alerts.filter((sent) => sent.alert.keyId !== undefined).length,
        failures,
      });

      expect(
        bench
          .events('leader.elected')
          .map((event) => event.identity)
          .sort(),
      ).toEqual(['keyroll-a', 'keyroll-b']);
      for (const keyId of KEYS) expect(bench.emulator.state.rollCount(keyId), keyId).toBe(1);
      expect(rolls.problems).toEqual([]);
      expect(lost.lostKeys).toEqual([]);
      expect(leaks.hits).toEqual([]);
      expect(failures).toBe(0);
      // The two really met at the keys: the second leader found each key under the first one's backend lock.
      expect(bench.events('key.lock.busy').length).toBeGreaterThan(0);
      expect(
        bench
          .events('key.succeeded')
          .map((event) => event.keyId)
          .sort(),
      ).toEqual([...KEYS].sort());
    } finally {
      await bench.close();
    }
  });
});
