// One scheduler per secret (issue 22): a key with scheduler: aws-native is rotated by Secrets
// Manager through keyroll's rotation function, so scheduled runs (run, the daemon's schedules and
// sweeps, drift heals) skip it; an on-demand rotation (a leak) still rotates it at once.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { runRotations } from '../../src/rotation/run.ts';
import { keyPolicy, startBench, type Bench } from './harness.ts';

const ENTRY = 'billing-api';
const SLOTS = ['key_demo_billing_a', 'key_demo_billing_b'] as const;
let bench: Bench;

beforeEach(async () => {
  bench = await startBench({
    keys: (org) => [
      keyPolicy(ENTRY, org(SLOTS[0]), { slots: SLOTS, consumerRefreshMs: 0, scheduler: 'aws-native' }),
    ],
  });
});
afterEach(async () => {
  await bench.close();
});

describe('scheduler: aws-native in runs', () => {
  it('a scheduled run skips the key (why aws-native) and rolls nothing', async () => {
    const runtime = await bench.runtime();
    try {
      const summary = await runRotations(runtime, {
        keys: [bench.key(ENTRY)],
        trigger: { reason: 'scheduled', force: false },
      });
      expect(summary.outcomes[0]).toMatchObject({ result: 'skipped', detail: 'aws-native' });
      expect(bench.events().find((e) => e.event === 'key.skipped')?.why).toBe('aws-native');
      expect(SLOTS.map((slot) => bench.emulator.state.apiKey(slot).rollCount)).toEqual([0, 0]);
    } finally {
      await runtime.close();
    }
  });

  it('a leak rotation still rotates it', async () => {
    const runtime = await bench.runtime();
    try {
      const summary = await runRotations(runtime, {
        keys: [bench.key(ENTRY)],
        trigger: { reason: 'leak', force: true, actor: 'me' },
      });
      expect(summary.outcomes[0]?.result).toBe('rotated');
    } finally {
      await runtime.close();
    }
  });
});
