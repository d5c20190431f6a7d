// Graceful shutdown in-process (the daemon's own shutdown(), as SIGTERM calls it): a key paused
// between its roll and its store finishes the store before shutdown returns; new triggers and
// readiness answer 503 meanwhile; schedules stop; keys not started are not started. When the
// grace ends first, shutdown says so (exit code 3) and the store still completes if the process
// lives on. The real-signal version is in cli.test.ts.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Backend } from '../../src/backends/types.ts';
import type { Daemon } from '../../src/daemon/daemon.ts';
import { wrapBackend } from '../rotation/harness.ts';
import {
  createGate,
  keyYaml,
  postTrigger,
  useDaemonBench,
  TRIGGER_KEYS,
  type Gate,
} from '../support/daemon-bench.ts';

const BILLING = 'key_demo_billing';
const SEARCH = 'key_demo_search';
const bench = useDaemonBench();
let gate: Gate;

/** Holds the store of billing's new secret at the gate: the roll has answered, the write waits. */
const holdBillingStore = (_name: string, backend: Backend): Backend =>
  wrapBackend(backend, {
    writeSecret: async (next, target) => {
      if (target.path === `${BILLING}.json`) await gate.wait();
      return next();
    },
  });

beforeEach(async () => {
  gate = createGate();
  await bench.writePolicy(
    keyYaml(BILLING, 'schedule: "0 3 * * 1"') + keyYaml(SEARCH, 'schedule: "0 3 * * 1"'),
  );
});

// Before the bench closes (the hooks run in reverse order): the held store lets go, on real timers.
afterEach(() => {
  vi.useRealTimers();
  gate.open();
});

async function startPausedAtStore(graceMs: number): Promise<Daemon> {
  // The first sweep rotates both never-rotated keys, one at a time: billing first.
  const daemon = await bench.start({
    graceMs,
    triggerKeys: TRIGGER_KEYS,
    runtime: { wrapBackend: holdBillingStore },
  });
  await gate.reached;
  expect(bench.emulator.state.rollCount(BILLING)).toBe(1);
  return daemon;
}

describe('daemon shutdown', () => {
  it('lets the rolled key finish its store before returning exit code 0, and starts nothing new', async () => {
    const daemon = await startPausedAtStore(30_000);
    const stopping = daemon.shutdown('SIGTERM');

    expect(daemon.readiness()).toEqual({ state: 'shutting-down' });
    expect((await fetch(`${daemon.url}/readyz`)).status).toBe(503);
    expect((await fetch(`${daemon.url}/healthz`)).status).toBe(200);
    expect(
      await postTrigger(daemon, { body: JSON.stringify({ keys: [SEARCH], reason: 'leak', actor: 'alice' }) }),
    ).toMatchObject({ status: 503, json: { error: { code: 'shutting-down' } } });
    expect(daemon.schedules().map((schedule) => schedule.nextRunAt)).toEqual([null]);
    expect(bench.events('daemon.stopping')).toEqual([
      expect.objectContaining({ signal: 'SIGTERM', inFlight: [BILLING] }),
    ]);

    gate.open();
    expect(await stopping).toEqual({ exitCode: 0, unfinished: [] });
    expect(bench.emulator.state.isLiveSecret(BILLING, await bench.storedSecret(BILLING))).toBe(true);
    expect(bench.events('key.succeeded').map((e) => e.keyId)).toEqual([BILLING]);
    // search was not started once shutdown began.
    expect(bench.emulator.state.rollCount(SEARCH)).toBe(0);
    expect(bench.events('daemon.stopped')).toEqual([
      expect.objectContaining({ exitCode: 0, unfinished: [] }),
    ]);
    await expect(fetch(`${daemon.url}/healthz`)).rejects.toThrow();
  });

  it('reports exit code 3 and the unfinished key when the grace ends first; the store still lands afterwards', async () => {
    const daemon = await startPausedAtStore(10_000);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    const stopping = daemon.shutdown('SIGTERM');
    await vi.advanceTimersByTimeAsync(10_000);
    expect(await stopping).toEqual({ exitCode: 3, unfinished: [BILLING] });
    expect(bench.events('daemon.grace_expired')).toEqual([
      expect.objectContaining({ inFlight: [BILLING], graceMs: 10_000 }),
    ]);
    expect(bench.events('daemon.stopped')).toEqual([
      expect.objectContaining({ exitCode: 3, unfinished: [BILLING] }),
    ]);

    // The CLI exits here; in-process the runtime stays open for the write, which still completes.
    vi.useRealTimers();
    gate.open();
    await daemon.idle();
    expect(bench.emulator.state.isLiveSecret(BILLING, await bench.storedSecret(BILLING))).toBe(true);
  });

  it('is idempotent: a second call (a second SIGTERM) waits for the same shutdown', async () => {
    const daemon = await startPausedAtStore(30_000);
    const first = daemon.shutdown('SIGTERM');
    const second = daemon.shutdown('SIGINT');
    gate.open();
    expect(await second).toEqual(await first);
    expect(bench.events('daemon.stopping')).toHaveLength(1);
  });
});
