// The fault suite for two-slot entries (invariants 4, 6 and 10): the faults of the single-key
// matrix, hitting a slot entry's alternation. After the faulted run and the next run, the active
// slot's stored secret works (not lost), the slot consumers held before stays alive unless a
// leak killed it, and no minted secret appears in any output.
import { performance } from 'node:perf_hooks';
import { afterEach, beforeEach, describe, expect, it, type TestContext } from 'vitest';
import { BackendError } from '../../src/backends/errors.ts';
import type { Backend } from '../../src/backends/types.ts';
import { runRotations, type RunSummary } from '../../src/rotation/run.ts';
import type { RuntimeOptions } from '../../src/rotation/runtime.ts';
import type { RunTrigger } from '../../src/rotation/types.ts';
import { keyPolicy, startBench, wrapBackend, type Bench } from '../rotation/harness.ts';
import { findSecrets } from '../support/secret-scan.ts';
import { checkNotLost, recordCase, type FaultCaseResult } from './record.ts';

const ENTRY = 'billing-api';
const SLOTS = ['key_demo_billing_a', 'key_demo_billing_b'] as const;
const HOUR = 3600_000;
const SCHEDULED: RunTrigger = { reason: 'scheduled', force: false };

let bench: Bench;

beforeEach(async () => {
  bench = await startBench({
    keys: (org) => [
      keyPolicy(ENTRY, org(SLOTS[0]), {
        slots: SLOTS,
        consumerRefreshMs: HOUR,
        minIntervalMs: HOUR,
        maxAgeMs: 2 * HOUR,
        driftCheckMs: HOUR,
      }),
    ],
  });
});
afterEach(async () => {
  await bench.close();
});

async function run(
  at: number,
  trigger: RunTrigger = SCHEDULED,
  options: Partial<RuntimeOptions> = {},
): Promise<RunSummary> {
  const runtime = await bench.runtime({
    now: () => new Date(Date.now() + at),
    monotonicMs: () => performance.now() + at,
    ...options,
  });
  try {
    return await runRotations(runtime, { keys: [bench.key(ENTRY)], trigger, concurrency: 1 });
  } finally {
    await runtime.close();
  }
}

async function storedSecret(): Promise<string | undefined> {
  const runtime = await bench.runtime();
  try {
    const primary = runtime.resolveKey(bench.key(ENTRY)).destinations[0];
    return (await primary.backend.readSecret(primary.target))?.secret.reveal();
  } finally {
    await runtime.close();
  }
}

const anySlotLive = (_: string, secret: string): boolean =>
  SLOTS.some((slot) => bench.emulator.state.isLiveSecret(slot, secret));
const down = (): BackendError =>
  new BackendError('KR_BACKEND_UNAVAILABLE', 'injected: down', {
    backend: 'files',
    kind: 'file',
    operation: 'write',
    path: 'x',
  });
const writesFail = (name: string, inner: Backend): Backend =>
  name === 'files' ? wrapBackend(inner, { writeSecret: () => Promise.reject(down()) }) : inner;

/** Runs a faulted alternation (after one clean rotation) and the next run, then records and judges. */
async function faultCase(
  ctx: TestContext,
  name: string,
  fault: string,
  step: string,
  arm: Partial<RuntimeOptions>,
  before?: () => void,
): Promise<{ faulted: RunSummary; next: RunSummary }> {
  await run(0);
  const heldByConsumers = await storedSecret();
  before?.();
  const alertsBefore = bench.alerter.alerts.length;
  const faulted = await run(3 * HOUR, SCHEDULED, arm);
  // Alerts the faulted run raised about this entry at the faulted step.
  const stepAlerts = bench.alerter.alerts
    .slice(alertsBefore)
    .filter(({ alert }) => alert.keyId === ENTRY && alert.step === step).length;
  // Whatever the fault did to the standby, consumers still on the value they held are not cut off.
  const consumersSafe = heldByConsumers !== undefined && anySlotLive(ENTRY, heldByConsumers);
  bench.emulator.faults.clear();
  const next = await run(6 * HOUR);
  const lost = checkNotLost([{ keyId: ENTRY, secrets: [await storedSecret()] }], anySlotLive);
  const leaks = findSecrets(
    [...bench.lines, JSON.stringify(bench.alerter.alerts), JSON.stringify([faulted, next])],
    bench.emulator.state.mintedSecrets(),
  );
  const failed = faulted.outcomes[0]?.result === 'failed' ? 1 : 0;
  const alerted = failed === 1 && stepAlerts > 0 ? 1 : 0;
  recordCase(ctx, {
    case: `${name} (slots)`,
    fault,
    backend: 'file',
    step,
    result: (faulted.outcomes[0]?.result ?? 'aborted') as FaultCaseResult,
    lost: lost.lost,
    leaked: leaks.leaked,
    alerted,
    failures: failed,
  });
  expect(lost.lostKeys).toEqual([]);
  expect(leaks.hits).toEqual([]);
  // A failed run alerts about its step, and a run that did not fail alerts about none: both
  // halves are asserted, so the check says something whichever way the fault went.
  expect(
    stepAlerts > 0,
    `${String(stepAlerts)} alert(s) at ${step}, run ${faulted.outcomes[0]?.result ?? 'without outcome'}`,
  ).toBe(failed === 1);
  expect(consumersSafe).toBe(true);
  return { faulted, next };
}

describe('fault matrix: a two-slot entry', () => {
  it('store × backend down during an alternation: the rolled standby is lost, consumers keep the active one, the next run rolls the standby again', async (ctx) => {
    const { faulted, next } = await faultCase(
      ctx,
      'store × backend down, no safety net',
      'backend down',
      'store',
      { wrapBackend: writesFail },
    );
    expect(faulted.outcomes[0]).toMatchObject({ result: 'failed', step: 'store' });
    // Only the standby was rolled: nothing consumers use died, so it is an error, not "unusable".
    const storeAlert = bench.alerter.alerts.find(({ alert }) => alert.step === 'store')?.alert;
    expect(storeAlert).toMatchObject({ severity: 'error' });
    expect(storeAlert?.summary).toContain('consumers keep using the active slot');
    expect(bench.events().some((e) => e.event === 'key.unusable')).toBe(false);
    expect(next.outcomes[0]?.result).toMatch(/^(rotated|recovered)$/);
  });

  it('roll × API 500 after applying during an alternation: re-rolled, stored, the active slot untouched', async (ctx) => {
    const { faulted } = await faultCase(
      ctx,
      'roll × API 500 after applying',
      'API 500 after applying',
      'roll',
      {},
      () => {
        bench.emulator.faults.inject('roll', { kind: 'failAfterApply', then: 'status500' }, 1);
      },
    );
    expect(faulted.outcomes[0]?.result).toMatch(/^(rotated|recovered)$/);
  });

  it('store × backend down with a fallback: the rolled standby lands in the fallback, the primary keeps the active slot consumers use', async (ctx) => {
    bench.key(ENTRY).fallbacks = [
      {
        backend: 'fallback',
        target: {
          path: `${ENTRY}.json`,
          shape: bench.key(ENTRY).destinations[0].target.shape,
        },
      },
    ];
    const { faulted, next } = await faultCase(
      ctx,
      'store × backend down, fallback as safety net',
      'backend down',
      'store',
      { wrapBackend: writesFail },
    );
    expect(faulted.outcomes[0]).toMatchObject({ result: 'failed', step: 'store', degraded: true });
    expect(next.outcomes[0]?.result).toMatch(/^(rotated|recovered)$/);
  });
});
