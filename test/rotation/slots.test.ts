// Invariant 10: two-slot entries keep consumers working. A scheduled rotation rolls the standby
// slot, stores it as active and leaves the previous active alive; a leak kills the leaked slot at
// once; drift (a key rolled behind keyroll's back) is found, alerted and healed. Each run is the
// engine on the emulator and the file backend, with the clock moved between runs.
import { performance } from 'node:perf_hooks';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { KeyState } from '../../src/backends/types.ts';
import type { KeyPolicy } from '../../src/policy/schema.ts';
import { runRotations, type RunSummary } from '../../src/rotation/run.ts';
import type { RunTrigger } from '../../src/rotation/types.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { keyPolicy, startBench, type Bench } from './harness.ts';

const ENTRY = 'billing-api';
const SLOT_A = 'key_demo_billing_a';
const SLOT_B = 'key_demo_billing_b';
const SINGLE = 'key_demo_search';
const HOUR = 3600_000;
const SCHEDULED: RunTrigger = { reason: 'scheduled', force: false };

let bench: Bench;
let offsetMs = 0;

beforeEach(async () => {
  offsetMs = 0;
  bench = await startBench({
    keys: (org) => [
      keyPolicy(ENTRY, org(SLOT_A), {
        slots: [SLOT_A, SLOT_B],
        consumerRefreshMs: HOUR,
        minIntervalMs: HOUR,
        maxAgeMs: 2 * HOUR,
        driftCheckMs: HOUR,
      }),
      keyPolicy(SINGLE, org(SINGLE), { minIntervalMs: HOUR, maxAgeMs: 2 * HOUR, driftCheckMs: HOUR }),
    ],
  });
});
afterEach(async () => {
  await bench.close();
});

async function run(keyId: string, trigger: RunTrigger = SCHEDULED, slot?: string): Promise<RunSummary> {
  const runtime = await bench.runtime({
    now: () => new Date(Date.now() + offsetMs),
    monotonicMs: () => performance.now() + offsetMs,
  });
  try {
    return await runRotations(runtime, {
      keys: [bench.key(keyId)],
      trigger,
      concurrency: 1,
      ...(slot ? { slots: new Map([[keyId, slot]]) } : {}),
    });
  } finally {
    await runtime.close();
  }
}

async function stored(keyId: string): Promise<{ secret: string | undefined; state: KeyState }> {
  const runtime = await bench.runtime();
  try {
    const primary = runtime.resolveKey(bench.key(keyId)).destinations[0];
    return {
      secret: (await primary.backend.readSecret(primary.target))?.secret.reveal(),
      state: await primary.backend.readState(primary.target),
    };
  } finally {
    await runtime.close();
  }
}

const live = (keyId: string, secret: string | undefined): boolean =>
  secret !== undefined && bench.emulator.state.isLiveSecret(keyId, secret);
const entry = (): KeyPolicy => bench.key(ENTRY);

function expectNoSecretInOutput(): void {
  expectNoSecrets(
    [...bench.lines, JSON.stringify(bench.alerter.alerts)],
    bench.emulator.state.mintedSecrets(),
    'the audit trail and the alerts',
  );
}

describe('two-slot alternation', () => {
  it('each scheduled rotation rolls the standby, stores it as active, and the previous active still works', async () => {
    const history: string[] = [];
    let previous: string | undefined;
    for (let round = 0; round < 4; round++) {
      offsetMs = round * 3 * HOUR;
      const summary = await run(ENTRY);
      expect(summary.outcomes[0]).toMatchObject({ result: 'rotated' });
      const now = await stored(ENTRY);
      const active = now.state.lastKeyId ?? '';
      expect(live(active, now.secret)).toBe(true);
      // The value consumers held until now was not rolled: they keep working until they refresh.
      if (previous !== undefined)
        expect(bench.emulator.state.isLiveSecret(history.at(-1) ?? '', previous)).toBe(true);
      history.push(active);
      previous = now.secret;
    }
    // The migration rule: slots[0] counts as active at first, so slot B is rolled first.
    expect(history).toEqual([SLOT_B, SLOT_A, SLOT_B, SLOT_A]);
    // The first rotation had nothing stored yet; each later one proved the previous active works.
    const verified = bench
      .events()
      .filter((e) => e.event === 'key.verified')
      .map((e) => e.previousActiveWorks);
    expect(verified).toEqual([undefined, true, true, true]);
    const intents = bench
      .events()
      .filter((e) => e.event === 'key.intent.set')
      .map((e) => e.rollingKeyId);
    expect(intents).toEqual(history);
    expectNoSecretInOutput();
  });

  it('a slot that stopped being active less than consumerRefresh ago is not rolled, even with --force', async () => {
    await run(ENTRY);
    offsetMs = 10 * 60_000;
    const forced = await run(ENTRY, { reason: 'manual', force: true });
    expect(forced.outcomes[0]).toMatchObject({ result: 'skipped', detail: 'consumer-refresh' });
    expect(bench.emulator.state.rollCount(SLOT_A)).toBe(0);
  });
});

describe('a leak of a slot entry', () => {
  it('naming the active slot rolls it at once (its value must die); the other slot is left alive', async () => {
    await run(ENTRY);
    const before = await stored(ENTRY);
    expect(before.state.lastKeyId).toBe(SLOT_B);
    offsetMs = 60_000;
    const summary = await run(ENTRY, { reason: 'leak', force: true, actor: 'test' }, SLOT_B);
    expect(summary.outcomes[0]).toMatchObject({ result: 'rotated', rolledKeyId: SLOT_B });
    const after = await stored(ENTRY);
    expect(after.state.lastKeyId).toBe(SLOT_B);
    expect(live(SLOT_B, before.secret)).toBe(false);
    expect(live(SLOT_B, after.secret)).toBe(true);
    expect(bench.emulator.state.rollCount(SLOT_A)).toBe(0);
    const succeeded = bench
      .events()
      .filter((e) => e.event === 'key.succeeded')
      .at(-1);
    expect(succeeded).toMatchObject({
      rolledKeyId: SLOT_B,
      activeKeyId: SLOT_B,
      previousActiveKeyId: SLOT_B,
    });
  });

  it('naming the standby rolls it now (an early alternation) and makes it active; the active slot stays alive', async () => {
    await run(ENTRY);
    const before = await stored(ENTRY);
    offsetMs = 60_000;
    const summary = await run(ENTRY, { reason: 'leak', force: true, actor: 'test' }, SLOT_A);
    expect(summary.outcomes[0]).toMatchObject({ result: 'rotated', rolledKeyId: SLOT_A });
    const after = await stored(ENTRY);
    expect(after.state.lastKeyId).toBe(SLOT_A);
    expect(live(SLOT_A, after.secret)).toBe(true);
    expect(live(SLOT_B, before.secret)).toBe(true);
  });

  it('naming the entry rolls the active slot', async () => {
    await run(ENTRY);
    offsetMs = 60_000;
    const summary = await run(ENTRY, { reason: 'leak', force: true, actor: 'test' });
    expect(summary.outcomes[0]).toMatchObject({ result: 'rotated', rolledKeyId: SLOT_B });
    expect(bench.emulator.state.rollCount(SLOT_A)).toBe(0);
  });
});

describe('the previous active secret', () => {
  it("when it was killed behind keyroll's back, the rotation still succeeds and alerts that its consumers fail", async () => {
    await run(ENTRY);
    bench.emulator.state.rollKey(SLOT_B);
    offsetMs = 3 * HOUR;
    entry().driftCheckMs = undefined;
    const summary = await run(ENTRY);
    expect(summary.outcomes[0]).toMatchObject({ result: 'rotated', rolledKeyId: SLOT_A });
    const alert = bench.alerter.alerts.find(({ alert: a }) => a.errorCode === 'KR_VERIFY_PREVIOUS_DEAD');
    expect(alert?.alert).toMatchObject({ severity: 'error', step: 'verify' });
  });
});

describe('drift', () => {
  it('a single key rolled outside keyroll is found by the next run past driftCheck, alerted critical, and healed', async () => {
    await run(SINGLE);
    bench.emulator.state.rollKey(SINGLE);
    expect(live(SINGLE, (await stored(SINGLE)).secret)).toBe(false);
    offsetMs = 90 * 60_000; // not due (maxAge 2h), but past driftCheck (1h)
    const summary = await run(SINGLE);
    expect(summary.outcomes[0]).toMatchObject({ result: 'rotated' });
    expect(bench.events().some((e) => e.event === 'key.drift.detected')).toBe(true);
    expect(
      bench.alerter.alerts.find(({ alert }) => alert.errorCode === 'KR_DRIFT_DETECTED')?.alert.severity,
    ).toBe('critical');
    expect(live(SINGLE, (await stored(SINGLE)).secret)).toBe(true);
    expectNoSecretInOutput();
  });

  it('a healthy key is probed once per driftCheck and the probe is recorded', async () => {
    await run(SINGLE);
    offsetMs = 90 * 60_000;
    await run(SINGLE);
    const probed = (await stored(SINGLE)).state.lastProbe;
    expect(probed?.result).toBe('works');
    offsetMs = 100 * 60_000;
    await run(SINGLE);
    expect(bench.events().filter((e) => e.event === 'key.probe' && e.step === 'drift')).toHaveLength(1);
  });

  /** Another runner's lock on the key's primary, as a rotation in flight holds it between its roll and its store. */
  async function lockedByAnotherRunner(keyId: string): Promise<void> {
    const runtime = await bench.runtime();
    try {
      const primary = runtime.resolveKey(bench.key(keyId)).destinations[0];
      const taken = await primary.backend.acquireLock(primary.target, {
        owner: 'another-runner',
        rotationId: 'in-flight',
        ttlMs: 10 * HOUR,
      });
      expect(taken.acquired).toBe(true);
    } finally {
      await runtime.close();
    }
  }

  it('a healthy key is probed and recorded while another runner holds its lock: the probe takes no lock while what it finds works', async () => {
    await run(SINGLE);
    await lockedByAnotherRunner(SINGLE);
    offsetMs = 90 * 60_000;
    await run(SINGLE);
    expect((await stored(SINGLE)).state.lastProbe?.result).toBe('works');
    expect(
      bench
        .events()
        .filter((e) => e.event === 'key.probe' && e.step === 'drift')
        .map((e) => e['verdict']),
    ).toEqual(['stored-secret-works']);
  });

  it('a dead finding while another runner holds the lock is neither alerted nor healed: it is confirmed under the lock, which is busy', async () => {
    await run(SINGLE);
    await lockedByAnotherRunner(SINGLE);
    // What a probe sees between another runner's roll and its store.
    bench.emulator.state.rollKey(SINGLE);
    const rolls = bench.emulator.state.rollCount(SINGLE);
    offsetMs = 90 * 60_000;
    await run(SINGLE);
    expect(
      bench
        .events()
        .filter((e) => e.event === 'key.drift.detected' || (e.event === 'key.probe' && e.step === 'drift')),
    ).toEqual([]);
    expect(bench.alerter.alerts.filter(({ alert }) => alert.errorCode === 'KR_DRIFT_DETECTED')).toEqual([]);
    expect(bench.emulator.state.rollCount(SINGLE)).toBe(rolls);
  });

  it('onDrift: alert reports the dead secret and rolls nothing', async () => {
    bench.key(SINGLE).onDrift = 'alert';
    await run(SINGLE);
    bench.emulator.state.rollKey(SINGLE);
    const rolls = bench.emulator.state.rollCount(SINGLE);
    offsetMs = 90 * 60_000;
    const summary = await run(SINGLE);
    expect(summary.outcomes[0]).toMatchObject({ result: 'failed', errorCode: 'KR_DRIFT_DETECTED' });
    expect(summary.exitCode).toBe(1);
    expect(bench.emulator.state.rollCount(SINGLE)).toBe(rolls);
  });

  it('a slot entry whose active slot was rolled outside keyroll is healed by rolling that dead slot; the standby is left alone', async () => {
    await run(ENTRY);
    bench.emulator.state.rollKey(SLOT_B);
    const standbyRolls = bench.emulator.state.rollCount(SLOT_A);
    offsetMs = 90 * 60_000;
    const summary = await run(ENTRY);
    expect(summary.outcomes[0]).toMatchObject({ result: 'rotated', rolledKeyId: SLOT_B });
    expect(bench.emulator.state.rollCount(SLOT_A)).toBe(standbyRolls);
    const after = await stored(ENTRY);
    expect(after.state.lastKeyId).toBe(SLOT_B);
    expect(live(SLOT_B, after.secret)).toBe(true);
  });
});

describe('the active slot is not rolled without a reason that needs it (invariant 10)', () => {
  it('rotate --key <active slot> --reason manual is refused: it would kill the value consumers use now', async () => {
    await run(ENTRY);
    const active = (await stored(ENTRY)).state.lastKeyId ?? '';
    const rolls = bench.emulator.state.rollCount(active);
    offsetMs = 3 * HOUR;
    const summary = await run(ENTRY, { reason: 'manual', force: true, actor: 'test' }, active);
    expect(summary.outcomes[0]).toMatchObject({ result: 'skipped', detail: 'active-slot' });
    expect(bench.emulator.state.rollCount(active)).toBe(rolls);
  });

  it('a drift heal whose stored secret works again under the lock rolls nothing', async () => {
    await run(SINGLE);
    const rolls = bench.emulator.state.rollCount(SINGLE);
    offsetMs = 10 * 60_000;
    const summary = await run(SINGLE, { reason: 'drift', force: true });
    expect(summary.outcomes[0]).toMatchObject({ result: 'skipped', detail: 'drift-healed' });
    expect(bench.emulator.state.rollCount(SINGLE)).toBe(rolls);
  });
});
