// Regressions for defects a review found in the rotation transaction; each test failed before
// its fix. The invariant each protects is named.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BackendError } from '../../src/backends/errors.ts';
import { Secret } from '../../src/audit/secret.ts';
import { keyPolicy, startBench, wrapBackend, JSON_SHAPE, type Bench } from './harness.ts';

const KEY = 'key_demo_billing';
let bench: Bench;
afterEach(async () => {
  await bench.close();
});

async function primaryOf(b: Bench) {
  const rt = await b.runtime();
  return { rt, primary: rt.resolveKey(b.key(KEY)).destinations[0] };
}

describe('invariant 6: a possibly-applied roll keeps the intent whatever the last attempt answered', () => {
  beforeEach(async () => {
    bench = await startBench();
  });

  it('invariant 6: applied-then-500 followed by 429 past the budget keeps the intent, alerts critical, and the next run repairs', async () => {
    await bench.run({ keys: [KEY] });
    bench.emulator.faults.inject('roll', { kind: 'failAfterApply', then: 'status500' }, 1);
    bench.emulator.faults.inject('roll', { kind: 'status', status: 429, retryAfter: '200' }, 5);
    const failed = await bench.run({
      keys: [KEY],
      trigger: { reason: 'leak', force: true },
      runtime: { rollBudget: { attempts: 5, maxWaitMs: 1_000 } },
    });
    expect(failed.outcomes[0]).toMatchObject({ result: 'failed', step: 'roll' });
    const alert = bench.alerter.alerts.at(-1)?.alert;
    expect(alert?.severity).toBe('critical');
    expect(alert?.nextAction).toMatch(/DEAD/);
    const { rt, primary } = await primaryOf(bench);
    expect((await primary.backend.readState(primary.target)).intent).toBeDefined();
    await rt.close();

    bench.emulator.faults.clear();
    const next = await bench.run({ keys: [KEY] });
    expect(next.outcomes[0]?.result).toBe('recovered');
  });
});

describe('invariant 7: a failed recovery repair is a failure', () => {
  it('invariant 7: the stored secret works but a second destination cannot be repaired → failed, exit 1, error alert', async () => {
    bench = await startBench({
      keys: (org) => [
        keyPolicy(KEY, org(KEY), {
          destinations: [
            { backend: 'files', target: { path: 'a.json', shape: JSON_SHAPE } },
            { backend: 'fallback', target: { path: 'b.json', shape: JSON_SHAPE } },
          ],
        }),
      ],
    });
    await bench.run({ keys: [KEY] });
    const { rt, primary } = await primaryOf(bench);
    await primary.backend.setIntent(primary.target, {
      rotationId: 'r-died',
      keyId: KEY,
      owner: 'dead',
      startedAt: new Date().toISOString(),
    });
    const secondary = rt.resolveKey(bench.key(KEY)).destinations[1]!;
    await secondary.backend.writeSecret(secondary.target, {
      secret: new Secret('stale-secret-value-123'),
      keyId: KEY,
      organizationId: bench.orgOf(KEY),
      rotationId: 'r-old',
      rotatedAt: new Date().toISOString(),
    });
    await rt.close();
    const down = new BackendError('KR_BACKEND_UNAVAILABLE', 'injected: down', {
      backend: 'fallback',
      kind: 'file',
      operation: 'write',
      path: 'b.json',
    });
    const summary = await bench.run({
      keys: [KEY],
      runtime: {
        wrapBackend: (name, b) =>
          name === 'fallback' ? wrapBackend(b, { writeSecret: () => Promise.reject(down) }) : b,
      },
    });
    expect(summary.outcomes[0]).toMatchObject({
      result: 'failed',
      step: 'recovery',
      errorCode: 'KR_RECOVERY_REPAIR_FAILED',
    });
    expect(summary.exitCode).toBe(1);
    expect(bench.alerter.alerts.at(-1)?.alert.severity).toBe('error');
  });
});

describe('invariant 6: a run that died after storing is not rolled again', () => {
  beforeEach(async () => {
    bench = await startBench();
  });

  it("invariant 6: the stored secret carries the died run's rotation id → its rotation is recorded, no second roll", async () => {
    const secret = bench.emulator.state.rollKey(KEY); // the died run's roll, applied and stored
    const { rt, primary } = await primaryOf(bench);
    await primary.backend.writeSecret(primary.target, {
      secret: new Secret(secret),
      keyId: KEY,
      organizationId: bench.orgOf(KEY),
      rotationId: 'r-died',
      rotatedAt: new Date().toISOString(),
    });
    await primary.backend.setIntent(primary.target, {
      rotationId: 'r-died',
      keyId: KEY,
      owner: 'dead',
      startedAt: new Date().toISOString(),
    });
    await rt.close();
    const rollsBefore = bench.emulator.state.rollCount(KEY);
    const summary = await bench.run({ keys: [KEY] });
    expect(summary.outcomes[0]).toMatchObject({ result: 'recovered', detail: 'stored-secret-works' });
    expect(bench.emulator.state.rollCount(KEY)).toBe(rollsBefore);
    expect(bench.emulator.state.isLiveSecret(KEY, secret)).toBe(true);
    const check = await primaryOf(bench);
    const state = await check.primary.backend.readState(check.primary.target);
    expect(state.lastRotationId).toBe('r-died');
    expect(state.intent).toBeUndefined();
    await check.rt.close();
  });

  it('a manual rotate (ignoring schedules) with a leftover intent whose secret works still rotates', async () => {
    await bench.run({ keys: [KEY] });
    const again = await primaryOf(bench);
    await again.primary.backend.setIntent(again.primary.target, {
      rotationId: 'r-died',
      keyId: KEY,
      owner: 'dead',
      startedAt: new Date().toISOString(),
    });
    await again.rt.close();
    const later = new Date(Date.now() + 2 * 3600_000); // past the minimum interval
    const summary = await bench.run({
      keys: [KEY],
      trigger: { reason: 'plan-change', force: false, ignoreSchedule: true },
      runtime: { now: () => later },
    });
    expect(summary.outcomes[0]?.result).toBe('rotated');
    expect(bench.emulator.state.rollCount(KEY)).toBe(2);
  });
});

describe('shutdown', () => {
  beforeEach(async () => {
    bench = await startBench();
  });

  it('SIGTERM while waiting out a 429 aborts the run cleanly (no failure alert, intent cleared)', async () => {
    bench.emulator.faults.inject('roll', { kind: 'status', status: 429, retryAfter: '30' }, 5);
    const controller = new AbortController();
    const rt = await bench.runtime({
      sleep: (_ms, signal) =>
        new Promise((_resolve, reject) => {
          signal?.addEventListener(
            'abort',
            () => {
              reject(new Error('SIGTERM received'));
            },
            { once: true },
          );
          controller.abort();
        }),
    });
    const { runRotations } = await import('../../src/rotation/run.ts');
    const summary = await runRotations(rt, {
      keys: [bench.key(KEY)],
      trigger: { reason: 'leak', force: true },
      signal: controller.signal,
    });
    await rt.close();
    expect(summary.exitCode).toBe(3);
    expect(summary.aborted?.reason).toBe('shutdown');
    expect(bench.alerter.alerts.filter((a) => a.alert.step === 'roll')).toEqual([]);
    const check = await primaryOf(bench);
    expect((await check.primary.backend.readState(check.primary.target)).intent).toBeUndefined();
    await check.rt.close();
  });
});

describe('invariant 2: credentials are renewed before the roll, not between roll and store', () => {
  beforeEach(async () => {
    bench = await startBench();
  });

  it('invariant 2: ensureFresh runs for every backend before the roll (once per backend), and the write follows the roll answer directly', async () => {
    const trail: string[] = [];
    const runtime = await bench.runtime({
      wrapBackend: (_name, b) =>
        Object.assign(
          wrapBackend(b, {
            writeSecret: (next) => {
              trail.push('write');
              return next();
            },
          }),
          {
            ensureFresh: (ms: number) => {
              trail.push(`ensureFresh:${ms}`);
              return Promise.resolve();
            },
          },
        ),
    });
    const originalRoll = runtime.api.rollKey.bind(runtime.api);
    runtime.api.rollKey = async (...args) => {
      trail.push('roll');
      return originalRoll(...args);
    };
    const { runRotations } = await import('../../src/rotation/run.ts');
    await runRotations(runtime, { keys: [bench.key(KEY)], trigger: { reason: 'manual', force: true } });
    await runtime.close();
    expect(trail).toEqual(['ensureFresh:60000', 'roll', 'write']);
  });

  it('invariant 1: credentials that cannot last the rotation stop it before the roll', async () => {
    const refuse = new BackendError('KR_BACKEND_DENIED', 'injected: token at its max TTL', {
      backend: 'files',
      kind: 'file',
      operation: 'preflight',
      path: 'x',
    });
    const summary = await bench.run({
      keys: [KEY],
      runtime: {
        wrapBackend: (_n, b) =>
          Object.assign(wrapBackend(b, {}), { ensureFresh: () => Promise.reject(refuse) }),
      },
    });
    expect(summary.outcomes[0]).toMatchObject({
      result: 'failed',
      step: 'preflight',
      errorCode: 'KR_BACKEND_DENIED',
    });
    expect(bench.emulator.state.rollCount(KEY)).toBe(0);
  });
});

describe("invariants 5 and 6: a lock lost before the roll leaves the new holder's intent marker alone", () => {
  beforeEach(async () => {
    bench = await startBench();
  });

  it('invariant 5: the lock expired during a long preflight and another runner took it and set its marker → no roll, its marker intact', async () => {
    const key = bench.key(KEY);
    let offsetMs = 0;
    const now = (): Date => new Date(Date.now() + offsetMs);
    // Time passes for this runner too (its lease is judged on its monotonic clock).
    const monotonicMs = (): number => performance.now() + offsetMs;
    const otherIntent = {
      rotationId: 'rot-other-runner',
      keyId: KEY,
      owner: 'other-host/1/x',
      startedAt: new Date().toISOString(),
    };
    let target: Parameters<typeof wrapBackend>[0] | undefined;
    // Whether the other runner got the lock, asserted after the run: an expect failing inside
    // the hook would be caught by the engine and turned into the run's outcome.
    const takeovers: boolean[] = [];
    const summary = await bench.run({
      keys: [KEY],
      trigger: { reason: 'leak', force: true },
      runtime: {
        now,
        monotonicMs,
        wrapBackend: (name, inner) => {
          if (name !== 'files') return inner;
          target = inner;
          return wrapBackend(inner, {
            // The read under the lock is the last step before the roll's guards: time passes
            // beyond the lock's TTL here, and another runner takes the key over and marks it.
            readState: async (next, t) => {
              const state = await next();
              offsetMs = key.lockTtlMs + 1_000;
              const taken = await inner.acquireLock(t, {
                owner: otherIntent.owner,
                rotationId: otherIntent.rotationId,
                ttlMs: key.lockTtlMs,
              });
              takeovers.push(taken.acquired);
              await inner.setIntent(t, otherIntent);
              return state;
            },
          });
        },
      },
    });
    expect(takeovers).toEqual([true]);
    expect(summary.outcomes[0]).toMatchObject({ result: 'failed', errorCode: 'KR_LOCK_LOST' });
    expect(bench.emulator.state.rollCount(KEY)).toBe(0);
    const state = await target!.readState(key.destinations[0].target);
    expect(state.intent?.rotationId).toBe('rot-other-runner');
    expect(state.lock?.owner).toBe(otherIntent.owner);
  });
});
