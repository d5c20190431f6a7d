// Invariant 9 (issue 12, finding 1): a runner that loses its lock can no longer roll or write,
// and nobody clears an intent marker that a live runner may still act on. Two runners are two
// runtimes (own backends, own owner id) on the same files and the same emulator; a runner whose
// clock is ahead sees the other's lock as expired, which is what a paused, frozen or slow holder
// looks like from outside.
import { performance } from 'node:perf_hooks';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { KeyState } from '../../src/backends/types.ts';
import { runRotations, type RunSummary } from '../../src/rotation/run.ts';
import type { RunTrigger } from '../../src/rotation/types.ts';
import type { RuntimeOptions } from '../../src/rotation/runtime.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { startBench, wrapBackend, type Bench } from './harness.ts';

const KEY = 'key_demo_billing';
const LEAK: RunTrigger = { reason: 'leak', force: true, actor: 'test' };

let bench: Bench;

beforeEach(async () => {
  bench = await startBench();
});
afterEach(async () => {
  await bench.close();
});

/** A runner whose clocks run `offsetMs` ahead of the real ones. */
function clocks(offsetMs: () => number): Pick<RuntimeOptions, 'now' | 'monotonicMs'> {
  return { now: () => new Date(Date.now() + offsetMs()), monotonicMs: () => performance.now() + offsetMs() };
}

async function runAs(options: Partial<RuntimeOptions>, trigger: RunTrigger = LEAK): Promise<RunSummary> {
  const runtime = await bench.runtime(options);
  try {
    return await runRotations(runtime, { keys: [bench.key(KEY)], trigger, concurrency: 1 });
  } finally {
    await runtime.close();
  }
}

async function stateOf(
  options: Partial<RuntimeOptions> = {},
): Promise<{ state: KeyState; secret: string | undefined }> {
  const runtime = await bench.runtime(options);
  try {
    const { destinations } = runtime.resolveKey(bench.key(KEY));
    const primary = destinations[0];
    const stored = await primary.backend.readSecret(primary.target);
    return { state: await primary.backend.readState(primary.target), secret: stored?.secret.reveal() };
  } finally {
    await runtime.close();
  }
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/**
 * Runner A: takes the lock, sets its marker, and waits at the roll until `gate` opens (never, for
 * a runner that died there with its request in flight). Resolves `atRoll` once it is there.
 */
async function runnerAtRoll(gate: Promise<void>): Promise<{ result: Promise<RunSummary> }> {
  const atRoll = deferred();
  const result = runAs({
    checkpoint: async (step) => {
      if (step !== 'roll') return;
      atRoll.resolve();
      await gate;
    },
  });
  await atRoll.promise;
  return { result };
}

const NEVER = new Promise<void>(() => undefined);

describe('invariant 9: fenced locks', () => {
  it("a paused holder whose lock was taken over cannot store its secret over the new holder's", async () => {
    await runAs({});
    const ttl = bench.key(KEY).lockTtlMs;
    const aRolled = deferred();
    const resumeA = deferred();
    // Runner A: rolls, then "freezes" between the roll answer and the write (SIGSTOP, GC pause).
    const runnerA = runAs({
      wrapBackend: (name, inner) =>
        name !== 'files'
          ? inner
          : wrapBackend(inner, {
              writeSecret: async (next) => {
                aRolled.resolve();
                await resumeA.promise;
                return next();
              },
            }),
    });
    await aRolled.promise;
    // Runner B, past A's lock TTL by its clock: takes the lock over, finds the stored secret dead
    // (A's roll killed it), re-rolls and stores.
    const b = await runAs(clocks(() => ttl + 1_000));
    expect(b.outcomes[0]).toMatchObject({ result: 'recovered' });
    const afterB = await stateOf();
    expect(afterB.secret && bench.emulator.state.isLiveSecret(KEY, afterB.secret)).toBe(true);

    resumeA.resolve();
    const a = await runnerA;
    expect(a.outcomes[0]).toMatchObject({ result: 'failed', step: 'store', errorCode: 'KR_LOCK_LOST' });
    const afterA = await stateOf();
    // B's live secret stays: the fence refused A's write.
    expect(afterA.secret).toBe(afterB.secret);
    expect(afterA.secret && bench.emulator.state.isLiveSecret(KEY, afterA.secret)).toBe(true);
    expect(
      bench.alerter.alerts.some(
        ({ alert }) => alert.errorCode === 'KR_LOCK_LOST' && alert.severity === 'critical',
      ),
    ).toBe(true);
    expectNoSecrets(bench.lines, bench.emulator.state.mintedSecrets(), 'the audit trail');
  });

  it('a holder killed mid-roll after a takeover: its marker is kept, and a roll landing late is found and repaired by a later run', async () => {
    await runAs({});
    const key = bench.key(KEY);
    // Runner A sets its marker and "dies" at the roll (its request is still in flight).
    await runnerAtRoll(NEVER);
    const leftByA = (await stateOf()).state.intent;
    expect(leftByA).toBeDefined();

    // Runner B takes the lock over; the stored secret still works (A's roll has not landed), but
    // A may still act, so A's marker is not cleared, and B's own marker stays held past it. A was a
    // leak that stored nothing: the working value is the one A's marker recorded, the leaked one,
    // so B rolls it (once, as its own leak trigger would) as the recovery of A's open leak, proves
    // it dead and says so (KR_RECOVERED_LEAK), rather than reporting a secret that "still works".
    const skewed = clocks(() => key.lockTtlMs + 1_000);
    const rollsBeforeB = bench.emulator.state.rollCount(KEY);
    const b = await runAs(skewed);
    expect(b.outcomes[0]).toMatchObject({ result: 'recovered' });
    expect(bench.emulator.state.rollCount(KEY)).toBe(rollsBeforeB + 1);
    const kept = bench.events().find((e) => e.event === 'key.intent.kept');
    expect(kept).toMatchObject({ keptRotationId: leftByA?.rotationId, why: 'lock-taken-over' });
    expect(bench.alerter.alerts.map(({ alert }) => alert.errorCode)).toEqual(['KR_RECOVERED_LEAK']);
    const afterB = await stateOf(skewed);
    expect(afterB.state.intent?.holdUntil).toBeDefined();

    // A's request lands late: the secret B stored is dead now.
    bench.emulator.state.rollKey(KEY);
    expect(afterB.secret && bench.emulator.state.isLiveSecret(KEY, afterB.secret)).toBe(false);

    // A scheduled run after the hold: the marker makes it probe, find the dead secret, re-roll.
    const later = clocks(() => 3 * key.lockTtlMs);
    const c = await runAs(later, { reason: 'scheduled', force: false });
    expect(c.outcomes[0]).toMatchObject({ result: 'recovered' });
    const healed = await stateOf(later);
    expect(healed.secret && bench.emulator.state.isLiveSecret(KEY, healed.secret)).toBe(true);
    expect(healed.state.intent).toBeUndefined();
    expect(bench.alerter.alerts.some(({ alert }) => alert.errorCode === 'KR_RECOVERED_REROLL')).toBe(true);
    expectNoSecrets(bench.lines, bench.emulator.state.mintedSecrets(), 'the audit trail');
  });

  it('a marker held until later is not cleared by a run before then, and is cleared (secret works) after', async () => {
    await runAs({});
    const key = bench.key(KEY);
    const skewed = clocks(() => key.lockTtlMs + 1_000);
    await runnerAtRoll(NEVER);
    await runAs(skewed);
    const held = (await stateOf(skewed)).state.intent;
    expect(held?.holdUntil).toBeDefined();

    // Before holdUntil: a scheduled run probes, keeps the marker, and (not due) skips.
    const early = await runAs(skewed, { reason: 'scheduled', force: false });
    expect(early.outcomes[0]).toMatchObject({ result: 'skipped', detail: 'intent-kept' });
    expect((await stateOf(skewed)).state.intent?.rotationId).toBe(held?.rotationId);

    // After it: the stored secret works and its rotation finished, so the marker is cleared
    // quietly (nothing died: no recovery alert) and the key is healthy.
    const alertsBefore = bench.alerter.alerts.length;
    const later = clocks(() => 3 * key.lockTtlMs);
    const after = await runAs(later, { reason: 'scheduled', force: false });
    expect(after.outcomes[0]).toMatchObject({ result: 'skipped', detail: 'already-rotated' });
    expect((await stateOf(later)).state.intent).toBeUndefined();
    expect(bench.alerter.alerts.slice(alertsBefore)).toEqual([]);
  });

  it('a slow holder keeps its lock alive in the background: another runner finds it busy past the TTL', async () => {
    const key = bench.key(KEY);
    key.lockTtlMs = 900;
    bench.policy.api.timeouts = { headersMs: 100, bodyMs: 100 };
    const release = deferred();
    const runnerA = (await runnerAtRoll(release.promise)).result;
    // Wait (real time) well past the TTL while A is slow (a long 429 wait, probes, backoff).
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const b = await runAs({});
    expect(b.outcomes[0]).toMatchObject({ result: 'busy' });
    release.resolve();
    const a = await runnerA;
    expect(a.outcomes[0]).toMatchObject({ result: 'rotated' });
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
  });

  it('a roll attempt is not sent once a refresh found the lock taken over', async () => {
    await runAs({});
    const key = bench.key(KEY);
    const rollsBefore = bench.emulator.state.rollCount(KEY);
    let jumpMs = 0;
    const summary = await runAs({
      // Time passes after the marker is set (a long pause): the lease no longer covers an attempt,
      // so the attempt must refresh first, and the refresh finds the lock taken by another runner.
      monotonicMs: () => performance.now() + jumpMs,
      wrapBackend: (name, inner) =>
        name !== 'files'
          ? inner
          : wrapBackend(inner, {
              setIntent: async (next) => {
                await next();
                jumpMs = key.lockTtlMs;
              },
              refreshLock: () => Promise.resolve(undefined),
            }),
    });
    expect(summary.outcomes[0]).toMatchObject({ result: 'failed', step: 'roll', errorCode: 'KR_LOCK_LOST' });
    expect(bench.emulator.state.rollCount(KEY)).toBe(rollsBefore);
    expect(bench.events().filter((e) => e.event === 'key.lock.lost')).toEqual([
      expect.objectContaining({ step: 'roll' }),
    ]);
  });

  it('no key lock is held while an alert is delivered: a hanging sink cannot keep other runners out', async () => {
    await runAs({});
    bench.emulator.faults.inject('roll', { kind: 'status', status: 400 }, 1);
    const locksSeenBySink: (string | undefined)[] = [];
    const summary = await runAs({
      alerter: {
        send: async () => {
          // What another runner would see while this sink takes its time.
          locksSeenBySink.push((await stateOf()).state.lock?.owner);
        },
      },
    });
    expect(summary.outcomes[0]).toMatchObject({ result: 'failed', step: 'roll' });
    expect(locksSeenBySink).toEqual([undefined]);
    const order = bench.events().map((e) => e.event);
    expect(order.lastIndexOf('key.lock.released')).toBeGreaterThan(order.lastIndexOf('key.failed'));
  });

  it('a kept marker survives a rotation that fails before its roll (the stalled runner may still act)', async () => {
    await runAs({});
    const key = bench.key(KEY);
    await runnerAtRoll(NEVER);
    // B takes A's lock over; the stored secret works, A's marker is kept and B's own (held)
    // replaces it; then B's roll is refused (400) before anything is rolled.
    bench.emulator.faults.inject('roll', { kind: 'status', status: 400 }, 1);
    const skewed = clocks(() => key.lockTtlMs + 1_000);
    const b = await runAs(skewed);
    expect(b.outcomes[0]).toMatchObject({ result: 'failed', step: 'roll' });
    const marker = (await stateOf(skewed)).state.intent;
    expect(marker?.holdUntil).toBeDefined();
  });
});
