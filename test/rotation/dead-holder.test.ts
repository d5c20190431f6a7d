// Issue 30: a runner that died holding a leak's key lock (before its roll, its intent marker
// written) no longer keeps the leaked key alive for lockTtl when its death is proven: the next
// leak rotation asks the runtime's prover about the holder, takes the lock over at once, audits
// the proof, and answers the leak the dead runner left open. A holder not proven dead (paused,
// or nothing to prove it by) keeps the key busy, as before. Two runners are two runtimes on the
// same files and emulator (fenced-lock.test.ts); the prover is a stand-in for the pod reads of
// src/leader/holder-liveness.ts (tested on the real kube-apiserver in
// test/integration/kube-holder-liveness.test.ts and test/faults/dead-holder.test.ts).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runRotations, type RunSummary } from '../../src/rotation/run.ts';
import type { RuntimeOptions } from '../../src/rotation/runtime.ts';
import type { HolderDeathProof, HolderProver, RunTrigger } from '../../src/rotation/types.ts';
import { startBench, type Bench } from './harness.ts';

const KEY = 'key_demo_billing';
const LEAK: RunTrigger = { reason: 'leak', force: true, actor: 'test' };
const POD_A = {
  POD_NAMESPACE: 'keyroll',
  POD_NAME: 'keyroll-a',
  POD_UID: '0b1c5f3e-7a43-4c1e-9b7d-2f6c1e0a9d11',
};
const POD_B = {
  POD_NAMESPACE: 'keyroll',
  POD_NAME: 'keyroll-b',
  POD_UID: '5d7e1a2b-0c3d-4e5f-8a9b-1c2d3e4f5a6b',
};

let bench: Bench;
/** The key's rolls once its first value was stored, before A. */
let rollsBefore = 0;

beforeEach(async () => {
  bench = await startBench();
});
afterEach(async () => {
  await bench.close();
});

async function runAs(options: Partial<RuntimeOptions>): Promise<RunSummary> {
  const runtime = await bench.runtime(options);
  try {
    return await runRotations(runtime, { keys: [bench.key(KEY)], trigger: LEAK, concurrency: 1 });
  } finally {
    await runtime.close();
  }
}

/** Runner A (in pod keyroll-a) takes the lock, writes its leak marker and never gets past the roll; its lock owner. */
async function diedAtRoll(): Promise<string> {
  // A value stored first: the one that leaks, and that A's marker records.
  await runAs({});
  rollsBefore = bench.emulator.state.rollCount(KEY);
  let reached: () => void = () => undefined;
  const atRoll = new Promise<void>((resolve) => {
    reached = resolve;
  });
  void runAs({
    env: POD_A,
    checkpoint: async (step) => {
      if (step !== 'roll') return;
      reached();
      await new Promise<never>(() => undefined);
    },
  });
  await atRoll;
  const runtime = await bench.runtime();
  try {
    const { primary } = runtime.resolveKey(bench.key(KEY));
    const state = await primary.backend.readState(primary.target);
    if (state.lock === undefined || state.intent === undefined) throw new Error('A holds no lock or marker');
    return state.lock.owner;
  } finally {
    await runtime.close();
  }
}

function prover(dead: (owner: string) => HolderDeathProof | undefined, asked: string[]): HolderProver {
  return {
    proveDead: (owner) => {
      asked.push(owner);
      return Promise.resolve(dead(owner));
    },
  };
}

describe('a leak rotation meeting the lock of a runner that died holding it (before its TTL)', () => {
  it('takes the lock over at once when the holder is proven dead, audits the proof, and rotates the leaked key', async () => {
    const owner = await diedAtRoll();
    expect(owner.startsWith('pod:keyroll/keyroll-a/')).toBe(true);
    const asked: string[] = [];
    const proof = { kind: 'pod-gone', pod: 'keyroll/keyroll-a' };
    const b = await runAs({
      env: POD_B,
      holderProver: prover((o) => (o === owner ? proof : undefined), asked),
    });

    expect(asked).toEqual([owner]);
    // Rotated as the recovery of the leak the dead runner left open (the leaked value rolled once).
    expect(b.outcomes[0]).toMatchObject({ result: 'recovered' });
    expect(bench.emulator.state.rollCount(KEY)).toBe(rollsBefore + 1);
    const events = bench.events();
    expect(events.filter((event) => event.event === 'key.lock.holder_dead')).toEqual([
      expect.objectContaining({ keyId: KEY, step: 'lock', holder: owner, proof }),
    ]);
    expect(events).toContainEqual(
      expect.objectContaining({ event: 'key.lock.acquired', keyId: KEY, tookOver: true }),
    );
    // The dead runner's leak marker was answered as its leak (recovery.ts), one recovery alert.
    expect(
      bench.alerter.alerts
        .filter(({ alert }) => alert.step === 'recovery')
        .map(({ alert }) => alert.errorCode),
    ).toEqual(['KR_RECOVERED_LEAK']);
  });

  it('leaves the key busy when the holder is not proven dead (alive, paused, or no answer)', async () => {
    const owner = await diedAtRoll();
    const asked: string[] = [];
    const b = await runAs({ env: POD_B, holderProver: prover(() => undefined, asked) });
    expect(asked).toEqual([owner]);
    expect(b.outcomes[0]).toMatchObject({ result: 'busy' });
    expect(bench.emulator.state.rollCount(KEY)).toBe(rollsBefore);
    expect(bench.events().filter((event) => event.event === 'key.lock.holder_dead')).toEqual([]);
  });

  it('without a prover (outside Kubernetes) leaves the key busy until the TTL, as before', async () => {
    await diedAtRoll();
    const b = await runAs({});
    expect(b.outcomes[0]).toMatchObject({ result: 'busy' });
    expect(bench.emulator.state.rollCount(KEY)).toBe(rollsBefore);
  });
});
