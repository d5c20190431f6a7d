// The leader SIGKILLed during a roll (issue 30): two `keyroll daemon` replicas elect their leader
// on a Lease of the real kube-apiserver (b-replicas.ts); the leader's sweep rotates a due key and
// is SIGKILLed mid-rotation; the other replica takes the Lease over once it expires, and its
// sweeps repair what the dead leader left (invariant 6): the key usable, the intent marker
// cleared, one recovery alert, every roll the API applied accounted for, no secret in any output.
//
// Where the kill lands (as in crash.test.ts): "between the roll answer and the write" is reached
// by making the emulator apply the roll and hold its answer (there is no pause point in that
// window, invariant 2: the process has nothing else to do there); "between the write and the
// finish" by the daemon's test pause point after the store (KEYROLL_TEST_PAUSE_AT=store) or,
// with KEYROLL_FAULTS=full, before the finish. The store is the file backend: one directory the
// replicas share, as pods share a backend.
import { describe, expect, it } from 'vitest';
import { findSecrets } from '../support/secret-scan.ts';
import { waitFor } from '../support/wait-for.ts';
import { kubeApiServer } from '../integration/servers.ts';
import { FULL } from './b-budget.ts';
import { OWNER_TOKEN } from './b-child.ts';
import { eventsOf, openReplicaCluster, untilHolder } from './b-replicas.ts';
import { faultKey, faultPolicyYaml, openWorld, type FaultWorld } from './b-world.ts';
import { checkNoDoubleRoll, checkNotLost, recordCase, reportedRolls } from './record.ts';

interface Boundary {
  name: string;
  step: 'roll' | 'store' | 'finish';
  /** KEYROLL_TEST_PAUSE_AT; absent for the roll in flight (the emulator holds the answer). */
  pauseAt?: string;
}

const BOUNDARIES: readonly Boundary[] = [
  { name: 'roll applied, answer not yet written', step: 'roll' },
  { name: 'stored, not finished', step: 'store', pauseAt: 'store' },
  ...(FULL ? [{ name: 'verified, not finished', step: 'finish' as const, pauseAt: 'finish' }] : []),
];

const KEY = faultKey('key_demo_billing', 0);
/** Short, so the next leader may take the dead leader's lock over within seconds (crash.test.ts). */
const LOCK_TTL_MS = 2_000;

const kube = await kubeApiServer();

async function keyState(world: FaultWorld): Promise<{ intent: boolean; live: boolean }> {
  const state = await world.files.readState(KEY.target);
  const stored = await world.storedSecret(KEY);
  return {
    intent: state.intent !== undefined,
    live: stored !== undefined && world.emulator.state.isLiveSecret(KEY.id, stored),
  };
}

describe.skipIf(kube === undefined)('the leader SIGKILLed during a roll: the next leader repairs', () => {
  for (const boundary of BOUNDARIES) {
    it(`killed at ${boundary.name}: the next leader's sweep clears the intent marker, the key works, one recovery alert`, async (ctx) => {
      if (kube === undefined) return;
      const world = await openWorld();
      try {
        await world.writeFile(
          'policy.yaml',
          faultPolicyYaml({
            baseUrl: world.emulator.url,
            alertUrl: `${world.receiver.url}/alerts`,
            keys: [KEY],
            lockTtl: `${String(LOCK_TTL_MS)}ms`,
            clockSkew: '100ms',
            headersMs: 1_200,
            bodyMs: 200,
          }),
        );
        // Rotated ten days ago: the weekly schedule has a slot since, so the leader's first sweep rotates it.
        await world.seedRotated(KEY, new Date(Date.now() - 10 * 24 * 3_600_000));
        const cluster = await openReplicaCluster(kube, world);
        if (!boundary.pauseAt) world.emulator.faults.inject('roll', { kind: 'failAfterApply', then: 'hang' });

        const a = cluster.spawnReplica('keyroll-a', boundary.pauseAt ? { pauseAt: boundary.pauseAt } : {});
        await untilHolder(cluster, 'keyroll-a');
        // The standby is running (and reading the Lease) before the leader dies, as a second pod is.
        const b = cluster.spawnReplica('keyroll-b');
        if (boundary.pauseAt) await a.waitForStderr(`keyroll: paused at ${boundary.pauseAt}\n`);
        // At once: the held answer times out after the policy's 1.2 s, and the leader would then
        // probe, find the key rolled and lost, and roll again itself (crash.test.ts, roll in flight).
        else await waitFor(() => world.emulator.state.rollCount(KEY.id) === 1, 'the held roll applied');
        const killed = await a.kill();
        if (process.env.KEYROLL_FAULTS_DEBUG) process.stderr.write(`killed ${new Date().toISOString()}\n`);
        const atKill = await world.files.readState(KEY.target);
        const rollsAtKill = world.emulator.state.rollCount(KEY.id);

        await untilHolder(cluster, 'keyroll-b');
        await waitFor(
          async () => {
            const state = await keyState(world);
            return !state.intent && state.live;
          },
          'the next leader repaired the key',
          { timeoutMs: 60_000, intervalMs: 50 },
        );
        b.process.kill('SIGTERM');
        const next = await b.result;
        if (process.env.KEYROLL_FAULTS_DEBUG)
          process.stderr.write(next.events.map((event) => JSON.stringify(event)).join('\n'));

        const events = [...killed.events, ...next.events];
        const lost = checkNotLost(
          [{ keyId: KEY.id, secrets: [await world.storedSecret(KEY)] }],
          (keyId, secret) => world.emulator.state.isLiveSecret(keyId, secret),
        );
        const leaks = findSecrets(world.haystacks(), [...world.emulator.state.mintedSecrets(), OWNER_TOKEN]);
        const rolls = checkNoDoubleRoll([
          {
            keyId: KEY.id,
            emulatorRolls: world.emulator.state.rollCount(KEY.id),
            reportedRolls: reportedRolls(events, KEY.id),
          },
        ]);
        const alerts = world.alerts().filter((alert) => alert.keyId === KEY.id);
        const recoveryAlerts = alerts.filter((alert) => alert.step === 'recovery');
        recordCase(ctx, {
          case: `leader SIGKILLed at ${boundary.name} (next leader repairs)`,
          fault: 'leader SIGKILL mid-rotation',
          backend: 'cli',
          step: boundary.step,
          result: 'recovered',
          lost: lost.lost,
          leaked: leaks.leaked,
          // The dead leader could not report its rotation; the next leader's recovery alert is its alert.
          alerted: recoveryAlerts.length === 1 ? 1 : 0,
          failures: 1,
        });

        // The kill hit where it was meant to: one roll applied, the marker and the lock left behind.
        expect(killed.signal).toBe('SIGKILL');
        expect(rollsAtKill).toBe(1);
        expect(atKill.intent).toBeDefined();
        expect(atKill.lock).toBeDefined();
        // The dead leader's key was repaired by the next leader, not by anyone else.
        expect(eventsOf(b, 'leader.elected').map((event) => event.identity)).toEqual(['keyroll-b']);
        expect(
          next.events.filter((event) => event.event === 'key.recovery.started' && event.keyId === KEY.id)
            .length,
        ).toBeGreaterThan(0);
        expect(next.code, next.stderr).toBe(0);
        expect(lost.lostKeys).toEqual([]);
        expect(await keyState(world)).toEqual({ intent: false, live: true });
        expect(recoveryAlerts).toEqual([
          expect.objectContaining({
            step: 'recovery',
            errorCode: expect.stringMatching(/^KR_RECOVERED_(INTENT|REROLL)$/) as unknown,
          }),
        ]);
        expect(alerts.filter((alert) => alert.step !== 'recovery')).toEqual([]);
        expect(rolls.problems).toEqual([]);
        expect(leaks.hits).toEqual([]);
      } finally {
        await world.close();
      }
    }, 120_000);
  }
});
