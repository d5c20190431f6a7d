// The daemon as one of several replicas (--leader-lease): the work that must run once (sweeps,
// schedules, drift probes, owed restarts, the leak reconcile) runs only while this replica holds
// the Lease; the signed trigger is answered by every replica (the backend key lock is the fence,
// invariant 5). The Lease here is in memory (test/support/memory-lease-store.ts); the election on
// the real kube-apiserver is test/integration/kube-leader-election.test.ts.
import { describe, expect, it } from 'vitest';
import type { ElectionTimings } from '../../src/leader/elector.ts';
import { MemoryLeaseStore } from '../support/memory-lease-store.ts';
import { keyYaml, postTrigger, TRIGGER_KEYS, useDaemonBench } from '../support/daemon-bench.ts';

const KEY = 'key_demo_billing';
/** Short, and within the elector's rules (renew deadline < lease duration, retry × 1.2 < renew deadline). */
const TIMINGS: ElectionTimings = { leaseDurationMs: 1_000, renewDeadlineMs: 600, retryPeriodMs: 50 };
const bench = useDaemonBench();

/** Polls every 10 ms; the bound only ends a hung test. */
async function until(test: () => boolean, what: string, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function leaderGauge(url: string): Promise<string | undefined> {
  return /^keyroll_leader (\d)$/m.exec(await (await fetch(`${url}/metrics`)).text())?.[1];
}

/** Another replica holding the Lease, renewing it every few ms until `stop`. */
function otherLeader(store: MemoryLeaseStore): { stop: () => void } {
  const renew = (): void => {
    store.write({
      holderIdentity: 'keyroll-other',
      leaseDurationSeconds: 1,
      renewTime: new Date(),
      leaseTransitions: 0,
    });
  };
  renew();
  const timer = setInterval(renew, 20);
  return {
    stop: () => {
      clearInterval(timer);
    },
  };
}

describe('the daemon with a Lease', () => {
  it('a replica that does not hold the Lease sweeps nothing, yet answers the trigger', async () => {
    await bench.writePolicy(keyYaml(KEY, 'maxAge: 2h'));
    const store = new MemoryLeaseStore();
    const other = otherLeader(store);
    try {
      const daemon = await bench.start({
        triggerKeys: TRIGGER_KEYS,
        leaderElection: { store, identity: 'keyroll-a', timings: TIMINGS },
      });
      await daemon.idle();
      await daemon.sweep();
      // The key is due (never rotated), but only the leader sweeps.
      expect(bench.emulator.state.rollCount(KEY)).toBe(0);
      expect(await leaderGauge(daemon.url)).toBe('0');
      expect(bench.events('leader.elected')).toEqual([]);
      const answer = await postTrigger(daemon, {
        body: JSON.stringify({ keys: [KEY], reason: 'leak', actor: 'alice' }),
      });
      expect(answer.status).toBeLessThan(300);
      await daemon.idle();
      expect(bench.emulator.state.rollCount(KEY)).toBe(1);
      expect(bench.emulator.state.isLiveSecret(KEY, await bench.storedSecret(KEY))).toBe(true);
    } finally {
      other.stop();
    }
  });

  it('takes the work over when the other holder stops renewing: audited, gauge 1, and its first sweep rotates what is due', async () => {
    await bench.writePolicy(keyYaml(KEY, 'maxAge: 2h'));
    const store = new MemoryLeaseStore();
    const other = otherLeader(store);
    const daemon = await bench.start({ leaderElection: { store, identity: 'keyroll-a', timings: TIMINGS } });
    await daemon.idle();
    expect(bench.emulator.state.rollCount(KEY)).toBe(0);
    other.stop();
    await until(() => bench.events('leader.elected').length === 1, 'keyroll-a leads');
    await until(
      () => bench.emulator.state.rollCount(KEY) === 1,
      'the sweep after the election rotates the due key',
    );
    await daemon.idle();
    expect(bench.events('leader.elected')[0]).toMatchObject({
      identity: 'keyroll-a',
      lease: 'test/keyroll-leader',
      transitions: 1,
    });
    expect(store.record?.holderIdentity).toBe('keyroll-a');
    expect(await leaderGauge(daemon.url)).toBe('1');
  });

  it("a new leader's first drift run leaves out a key its predecessor checked within the interval; its next sweep probes it", async () => {
    await bench.writePolicy(keyYaml(KEY, 'maxAge: 2h'));
    const store = new MemoryLeaseStore();
    const other = otherLeader(store);
    const daemon = await bench.start({
      triggerKeys: TRIGGER_KEYS,
      leaderElection: { store, identity: 'keyroll-a', timings: TIMINGS },
    });
    // Rotated (so checked) moments ago while the other replica led.
    const answer = await postTrigger(daemon, {
      body: JSON.stringify({ keys: [KEY], reason: 'manual', actor: 'alice' }),
    });
    expect(answer.status).toBeLessThan(300);
    await daemon.idle();
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    other.stop();
    await until(() => bench.events('leader.elected').length === 1, 'keyroll-a leads');
    await daemon.sweep();
    await daemon.idle();
    // The election requested the takeover sweep already; this one runs after it (or is it, joined):
    // of the two, only the second probed.
    expect(bench.events('key.probe')).toHaveLength(1);
    await daemon.sweep();
    await daemon.idle();
    expect(bench.events('key.probe')).toHaveLength(2);
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
  });

  it('a leader cut off from the API server stops at its renew deadline: audited with the cause, gauge 0, and sweeps start nothing', async () => {
    await bench.writePolicy(keyYaml(KEY, 'maxAge: 2h'));
    const store = new MemoryLeaseStore();
    const daemon = await bench.start({ leaderElection: { store, identity: 'keyroll-a', timings: TIMINGS } });
    await until(() => bench.events('leader.elected').length === 1, 'keyroll-a leads');
    await until(() => bench.emulator.state.rollCount(KEY) === 1, 'the first sweep rotates the due key');
    await daemon.idle();
    store.cut = true;
    await until(() => bench.events('leader.lost').length === 1, 'keyroll-a stops leading');
    expect(bench.events('leader.lost')[0]).toMatchObject({
      identity: 'keyroll-a',
      why: 'renew-deadline',
      errorCode: 'KR_LEADER_UNREACHABLE',
    });
    expect(bench.events('leader.failed')[0]).toMatchObject({
      leading: true,
      errorCode: 'KR_LEADER_UNREACHABLE',
    });
    expect(await leaderGauge(daemon.url)).toBe('0');
    // A force rotation would be due at once; as a follower the daemon must not start it.
    await bench.writePolicy(keyYaml(KEY, 'maxAge: 1ms'));
    await daemon.reload();
    await daemon.sweep();
    await daemon.idle();
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
  });

  it('a shutdown releases the Lease (holderIdentity cleared) so the next replica need not wait it out', async () => {
    await bench.writePolicy(keyYaml(KEY, 'schedule: "0 3 * * 1"'));
    const store = new MemoryLeaseStore();
    const daemon = await bench.start({ leaderElection: { store, identity: 'keyroll-a', timings: TIMINGS } });
    await until(() => bench.events('leader.elected').length === 1, 'keyroll-a leads');
    await daemon.shutdown();
    expect(store.record?.holderIdentity).toBe('');
    expect(bench.events('leader.lost')[0]).toMatchObject({ why: 'released' });
  });

  it('without a Lease the daemon leads alone (gauge 1) and sweeps as before', async () => {
    await bench.writePolicy(keyYaml(KEY, 'maxAge: 2h'));
    const daemon = await bench.start();
    await daemon.idle();
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    expect(await leaderGauge(daemon.url)).toBe('1');
    expect(bench.events('daemon.started')[0]).toMatchObject({ leaderElection: 'off' });
  });
});
