// Issue 18: the drift probe covers both slots of a two-slot entry. A standby rolled outside keyroll
// is alerted (error, KR_DRIFT_STANDBY_DEAD) and re-rolled at its turn, as the standby: never by
// rolling the active slot, whose value consumers use (invariant 10). Before, only `status --probe`
// and recovery ever looked at the standby.
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import type { KeyPolicy } from '../../src/policy/schema.ts';
import { runRotations, type RunSummary } from '../../src/rotation/run.ts';
import type { RunTrigger } from '../../src/rotation/types.ts';
import { keyPolicy, startBench, type Bench } from './harness.ts';

const ENTRY = 'billing-api';
const SLOT_A = 'key_demo_billing_a';
const SLOT_B = 'key_demo_billing_b';
const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const SCHEDULED: RunTrigger = { reason: 'scheduled', force: false };

let bench: Bench;
let offsetMs = 0;
afterEach(async () => {
  await bench.close();
});

/**
 * An entry rotated twice (B, then A): A is active, and the value kept before it is B's, the
 * standby's. `raw`: a stored value that does not name its key.
 */
async function alternatedTwice(overrides: Partial<KeyPolicy> = {}, raw = false): Promise<void> {
  offsetMs = 0;
  bench = await startBench({
    keys: (org) => [
      keyPolicy(ENTRY, org(SLOT_A), {
        slots: [SLOT_A, SLOT_B],
        consumerRefreshMs: HOUR,
        minIntervalMs: HOUR,
        maxAgeMs: 4 * HOUR,
        driftCheckMs: 10 * MINUTE,
        ...(raw
          ? {
              destinations: [
                {
                  backend: 'files',
                  target: {
                    path: `${ENTRY}.key`,
                    shape: { format: 'raw', secretField: 'apiKey', fields: [] },
                  },
                },
              ],
            }
          : {}),
        ...overrides,
      }),
    ],
  });
  expect((await run()).outcomes[0]).toMatchObject({ result: 'rotated', rolledKeyId: SLOT_B });
  offsetMs = 5 * HOUR;
  expect((await run()).outcomes[0]).toMatchObject({ result: 'rotated', rolledKeyId: SLOT_A });
}

async function run(trigger: RunTrigger = SCHEDULED, slot?: string): Promise<RunSummary> {
  const runtime = await bench.runtime({
    now: () => new Date(Date.now() + offsetMs),
    monotonicMs: () => performance.now() + offsetMs,
  });
  try {
    return await runRotations(runtime, {
      keys: [bench.key(ENTRY)],
      trigger,
      concurrency: 1,
      ...(slot ? { slots: new Map([[ENTRY, slot]]) } : {}),
    });
  } finally {
    await runtime.close();
  }
}

const standbyAlerts = () =>
  bench.alerter.alerts
    .map(({ alert }) => alert)
    .filter((alert) => alert.errorCode === 'KR_DRIFT_STANDBY_DEAD');
const rolls = (keyId: string): number => bench.emulator.state.rollCount(keyId);

describe('a standby rolled outside keyroll', () => {
  it('is found by the drift probe, alerted, and rolled as the standby at once; the active slot is not rolled and still works', async () => {
    await alternatedTwice();
    const activeSecret = bench.emulator.state.currentSecret(SLOT_A);
    bench.emulator.state.rollKey(SLOT_B);
    const [aRolls, bRolls] = [rolls(SLOT_A), rolls(SLOT_B)];
    // Not due (maxAge 4h), past driftCheck, and within consumerRefresh of the last rotation.
    offsetMs = 5 * HOUR + 20 * MINUTE;
    const summary = await run();

    expect(standbyAlerts()).toEqual([
      expect.objectContaining({ severity: 'error', step: 'drift', keyId: ENTRY }),
    ]);
    expect(standbyAlerts()[0]?.summary).toMatch(
      /the standby slot key_demo_billing_b of key billing-api .* no longer works/,
    );
    expect(bench.events().filter((e) => e.event === 'key.drift.detected')).toEqual([
      expect.objectContaining({ slot: 'standby', standbyKeyId: SLOT_B }),
    ]);
    // Nobody can use a dead value, so the heal need not wait for consumers to refresh (invariant 10).
    expect(summary.outcomes[0]).toMatchObject({ result: 'rotated', rolledKeyId: SLOT_B });
    expect(rolls(SLOT_A)).toBe(aRolls);
    expect(rolls(SLOT_B)).toBe(bRolls + 1);
    expect(bench.emulator.state.isLiveSecret(SLOT_A, activeSecret)).toBe(true);
  });

  it('with onDrift: alert is alerted and reported failed, and nothing is rolled', async () => {
    await alternatedTwice({ onDrift: 'alert' });
    bench.emulator.state.rollKey(SLOT_B);
    const [aRolls, bRolls] = [rolls(SLOT_A), rolls(SLOT_B)];
    offsetMs = 5 * HOUR + 20 * MINUTE;
    const summary = await run();
    expect(summary.outcomes[0]).toMatchObject({
      result: 'failed',
      step: 'drift',
      errorCode: 'KR_DRIFT_STANDBY_DEAD',
    });
    expect(summary.exitCode).toBe(1);
    expect(standbyAlerts()[0]?.nextAction).toMatch(/the next scheduled rotation rolls it/);
    expect([rolls(SLOT_A), rolls(SLOT_B)]).toEqual([aRolls, bRolls]);
  });

  it('whose kept value does not name its key waits for consumerRefresh before it is rolled', async () => {
    await alternatedTwice({}, true);
    bench.emulator.state.rollKey(SLOT_B);
    const [aRolls, bRolls] = [rolls(SLOT_A), rolls(SLOT_B)];
    offsetMs = 5 * HOUR + 20 * MINUTE;
    expect((await run()).outcomes[0]).toMatchObject({
      result: 'failed',
      detail: 'drift-standby',
      errorCode: 'KR_DRIFT_STANDBY_DEAD',
    });
    expect(rolls(SLOT_B)).toBe(bRolls);
    offsetMs = 6 * HOUR + 10 * MINUTE;
    expect((await run()).outcomes[0]).toMatchObject({ result: 'rotated', rolledKeyId: SLOT_B });
    expect(rolls(SLOT_A)).toBe(aRolls);
  });
});

describe('a standby that works', () => {
  it('is probed with the active slot and raises nothing', async () => {
    await alternatedTwice();
    offsetMs = 5 * HOUR + 20 * MINUTE;
    expect((await run()).outcomes[0]).toMatchObject({ result: 'skipped', detail: 'not-due' });
    expect(
      bench
        .events()
        .filter((e) => e.event === 'key.probe' && e.step === 'drift')
        .map((e) => [e.slot, e.verdict]),
    ).toEqual([
      ['active', 'stored-secret-works'],
      ['standby', 'stored-secret-works'],
    ]);
    expect(bench.alerter.alerts).toEqual([]);
  });

  it('is not taken for dead after a leak rotation of the active slot: the value kept then is that slot’s killed one', async () => {
    await alternatedTwice();
    offsetMs = 5 * HOUR + 5 * MINUTE;
    expect((await run({ reason: 'leak', force: true, actor: 'test' }, SLOT_A)).outcomes[0]).toMatchObject({
      result: 'rotated',
      rolledKeyId: SLOT_A,
    });
    offsetMs = 5 * HOUR + 30 * MINUTE;
    expect((await run()).outcomes[0]).toMatchObject({ result: 'skipped', detail: 'not-due' });
    expect(
      bench
        .events()
        .filter((e) => e.event === 'key.probe' && e.slot === 'standby')
        .map((e) => e.verdict),
    ).toEqual(['not-kept']);
    expect(standbyAlerts()).toEqual([]);
  });
});
