// A key never overlaps itself inside the daemon: a trigger for a key that is being rotated waits
// for that rotation and then runs; a schedule tick that finds its key busy skips it (audited). No
// rotation of the daemon ever meets the daemon's own backend lock.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Backend } from '../../src/backends/types.ts';
import { wrapBackend } from '../rotation/harness.ts';
import {
  createGate,
  keyYaml,
  postTrigger,
  useDaemonBench,
  TRIGGER_KEYS,
  type Gate,
} from '../support/daemon-bench.ts';

const KEY = 'key_demo_billing';
const bench = useDaemonBench();
let gate: Gate;

/** Holds the first store of the key at the gate; later stores go through. */
const holdFirstStore = (_name: string, backend: Backend): Backend => {
  let held = false;
  return wrapBackend(backend, {
    writeSecret: async (next) => {
      if (!held) {
        held = true;
        await gate.wait();
      }
      return next();
    },
  });
};

beforeEach(async () => {
  gate = createGate();
  await bench.writePolicy(keyYaml(KEY, 'schedule: "0 3 * * *"'));
});

// Before the bench closes (the hooks run in reverse order): the held store lets go, on real timers.
afterEach(() => {
  vi.useRealTimers();
  gate.open();
});

describe('one rotation per key at a time', () => {
  it('a trigger for a key mid-rotation is accepted at once and rotates it right after', async () => {
    const daemon = await bench.start({ triggerKeys: TRIGGER_KEYS, runtime: { wrapBackend: holdFirstStore } });
    await gate.reached;
    const answer = await postTrigger(daemon, {
      body: JSON.stringify({ keys: [KEY], reason: 'leak', actor: 'alice' }),
    });
    expect(answer.status).toBe(202);
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);

    gate.open();
    await daemon.idle();
    expect(bench.emulator.state.rollCount(KEY)).toBe(2);
    const promised = (answer.json.rotations as { rotationId: string }[])[0]?.rotationId;
    expect(bench.events('key.succeeded').map((e) => e.rotationId)).toEqual([expect.any(String), promised]);
    expect(bench.events('key.lock.busy')).toEqual([]);
    expect(bench.emulator.state.isLiveSecret(KEY, await bench.storedSecret(KEY))).toBe(true);
  });

  it('a schedule tick that finds its key still rotating skips it and says so', async () => {
    vi.useFakeTimers({
      now: new Date('2030-01-07T02:59:59Z'),
      toFake: ['setTimeout', 'clearTimeout', 'Date'],
    });
    const daemon = await bench.start({ runtime: { wrapBackend: holdFirstStore } });
    await gate.reached;
    await vi.advanceTimersByTimeAsync(1_000);
    expect(bench.events('key.skipped')).toEqual([
      expect.objectContaining({ keyId: KEY, why: 'in-flight', schedule: '0 3 * * *' }),
    ]);
    gate.open();
    await daemon.idle();
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    expect(bench.events('key.lock.busy')).toEqual([]);
  });
});
