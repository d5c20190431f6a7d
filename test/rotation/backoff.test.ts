// Failure backoff and quarantine (issue 14 §1): a key that keeps failing is tried less and less
// often, then left for a person; alerts go out on a change of state, not on every attempt. A key
// with an intent marker is the exception: it may be dead, so it is repaired and alerted every run.
import { afterEach, describe, expect, it } from 'vitest';
import { BackendError } from '../../src/backends/errors.ts';
import type { FailureSettings } from '../../src/policy/schema.ts';
import { resumeKey } from '../../src/rotation/quarantine.ts';
import type { RunTrigger } from '../../src/rotation/types.ts';
import { keyPolicy, startBench, wrapBackend, type Bench } from './harness.ts';

const KEY = 'key_demo_billing';
const HOUR = 3600_000;
const FAILURES: FailureSettings = {
  backoffInitialMs: HOUR,
  backoffCapMs: 4 * HOUR,
  jitter: 0,
  quarantineAfter: 5,
  remindEveryMs: 24 * HOUR,
};

let bench: Bench;
afterEach(async () => {
  await bench.close();
});

const denied = new BackendError('KR_BACKEND_DENIED', 'injected: permission denied on the path', {
  backend: 'files',
  kind: 'file',
  operation: 'preflight',
  path: `${KEY}.json`,
});

/** A bench whose clock the test moves, and whose primary's preflight fails while `broken` is set. */
async function brokenBench(failures: FailureSettings = FAILURES) {
  bench = await startBench({ keys: (org) => [keyPolicy(KEY, org(KEY), { failures })] });
  const clock = { offsetMs: 0, broken: true };
  const run = (trigger: Partial<RunTrigger> = {}) =>
    bench.run({
      trigger,
      runtime: {
        now: () => new Date(Date.now() + clock.offsetMs),
        wrapBackend: (name, b) =>
          name === 'files'
            ? wrapBackend(b, { preflight: (next) => (clock.broken ? Promise.reject(denied) : next()) })
            : b,
      },
    });
  return { clock, run };
}

async function stateOf(b: Bench) {
  const rt = await b.runtime();
  try {
    const primary = rt.resolveKey(b.key(KEY)).destinations[0];
    return { state: await primary.backend.readState(primary.target), primary };
  } finally {
    await rt.close();
  }
}

const events = (name: string) => bench.events().filter((e) => e.event === name);

describe('failure backoff and quarantine', () => {
  it('a key failing preflight 10 runs in a row alerts on the first failure and on quarantine, not ten times', async () => {
    const { clock, run } = await brokenBench();
    const results: string[] = [];
    for (let i = 0; i < 10; i++) {
      const summary = await run();
      results.push(
        `${summary.outcomes[0]?.result}:${summary.outcomes[0]?.detail ?? ''}`.replace(/:.*injected.*/, ''),
      );
      clock.offsetMs += 4 * HOUR + 1_000; // past the longest backoff: every run may attempt
    }
    expect(results).toEqual([
      'failed',
      'failed',
      'failed',
      'failed',
      'failed',
      'skipped:quarantined',
      'skipped:quarantined',
      'skipped:quarantined',
      'skipped:quarantined',
      'skipped:quarantined',
    ]);
    const alerts = bench.alerter.alerts.map((a) => a.alert);
    expect(alerts.map((a) => [a.severity, a.errorCode])).toEqual([
      ['error', 'KR_BACKEND_DENIED'],
      ['critical', 'KR_KEY_QUARANTINED'],
    ]);
    expect(alerts[1]?.summary).toMatch(/QUARANTINED after 5 consecutive failures since/);
    // Every failure is still audited; the three repeats say why they were not alerted.
    expect(events('key.failed')).toHaveLength(5);
    expect(events('alert.suppressed')).toHaveLength(3);
    expect(events('key.quarantined')).toHaveLength(1);
    const { state } = await stateOf(bench);
    expect(state.lastFailure).toMatchObject({
      consecutive: 5,
      step: 'preflight',
      errorCode: 'KR_BACKEND_DENIED',
    });
    expect(state.lastFailure?.quarantinedAt).toBeDefined();
  });

  it('runs every 10 minutes wait out the backoff: one alert, the key skipped until the backoff ends', async () => {
    const { clock, run } = await brokenBench();
    const results: string[] = [];
    for (let i = 0; i < 10; i++) {
      const summary = await run();
      const outcome = summary.outcomes[0];
      results.push(`${outcome?.result ?? '?'}:${outcome?.result === 'skipped' ? outcome.detail : ''}`);
      clock.offsetMs += 10 * 60_000;
    }
    // 1 h backoff after the first failure: runs 2..6 wait, run 7 (60 min later) attempts again.
    expect(results).toEqual([
      'failed:',
      'skipped:backoff',
      'skipped:backoff',
      'skipped:backoff',
      'skipped:backoff',
      'skipped:backoff',
      'failed:',
      'skipped:backoff',
      'skipped:backoff',
      'skipped:backoff',
    ]);
    expect(bench.alerter.alerts).toHaveLength(1);
    expect(events('key.skipped').filter((e) => e.why === 'backoff')).toHaveLength(8);
    const { state } = await stateOf(bench);
    expect(state.lastFailure).toMatchObject({ consecutive: 2 });
    // Failure 2 waits initial·2 = 2 h.
    expect(Date.parse(state.lastFailure?.nextAttemptAt ?? '') - Date.parse(state.lastFailure?.at ?? '')).toBe(
      2 * HOUR,
    );
  });

  it('a quarantined key is reminded about once every remindEvery, not on every run', async () => {
    const { clock, run } = await brokenBench({ ...FAILURES, quarantineAfter: 1, remindEveryMs: 24 * HOUR });
    await run();
    expect(bench.alerter.alerts.map((a) => a.alert.errorCode)).toEqual(['KR_KEY_QUARANTINED']);
    clock.offsetMs += 12 * HOUR;
    await run();
    expect(bench.alerter.alerts).toHaveLength(1);
    clock.offsetMs += 12 * HOUR + 1_000;
    const reminded = await run();
    expect(reminded.outcomes[0]).toMatchObject({ result: 'skipped', detail: 'quarantined' });
    expect(bench.alerter.alerts.map((a) => a.alert.errorCode)).toEqual([
      'KR_KEY_QUARANTINED',
      'KR_KEY_QUARANTINED',
    ]);
    expect(bench.alerter.alerts[1]?.alert.summary).toMatch(/still QUARANTINED/);
    clock.offsetMs += HOUR;
    await run();
    expect(bench.alerter.alerts).toHaveLength(2);
  });

  it('a quarantined key whose reminder is not due takes no lock: a sweep passing it writes nothing (on AWS, a lock is a version of the secret)', async () => {
    bench = await startBench({
      keys: (org) => [
        keyPolicy(KEY, org(KEY), { failures: { ...FAILURES, quarantineAfter: 1, remindEveryMs: 24 * HOUR } }),
      ],
    });
    let offsetMs = 0;
    let locks = 0;
    const run = () =>
      bench.run({
        runtime: {
          now: () => new Date(Date.now() + offsetMs),
          wrapBackend: (name, b) =>
            name === 'files'
              ? wrapBackend(b, {
                  preflight: () => Promise.reject(denied),
                  acquireLock: (next) => {
                    locks += 1;
                    return next();
                  },
                })
              : b,
        },
      });
    await run();
    expect(bench.alerter.alerts.map((a) => a.alert.errorCode)).toEqual(['KR_KEY_QUARANTINED']);
    locks = 0;
    for (let sweep = 0; sweep < 3; sweep++) {
      offsetMs += HOUR;
      expect((await run()).outcomes[0]).toMatchObject({ result: 'skipped', detail: 'quarantined' });
    }
    expect(locks).toBe(0);
    offsetMs += 24 * HOUR;
    await run();
    // The reminder that is due is written under the lock, as before.
    expect(locks).toBe(1);
    expect(bench.alerter.alerts).toHaveLength(2);
  });

  it('keyroll resume (audited with the actor) lifts the quarantine: the next run attempts the key at once', async () => {
    const { clock, run } = await brokenBench({ ...FAILURES, quarantineAfter: 2 });
    await run();
    clock.offsetMs += 2 * HOUR;
    await run();
    expect((await run()).outcomes[0]).toMatchObject({ result: 'skipped', detail: 'quarantined' });

    clock.broken = false;
    const rt = await bench.runtime({ now: () => new Date(Date.now() + clock.offsetMs) });
    const primary = rt.resolveKey(bench.key(KEY)).destinations[0];
    const resumed = await resumeKey(
      bench.key(KEY),
      primary,
      rt.rotationDeps(bench.audit),
      bench.audit,
      'alice',
    );
    await rt.close();
    expect(resumed).toMatchObject({ kind: 'resumed', streak: { consecutive: 2 } });
    expect(events('key.resumed')).toHaveLength(1);
    expect(events('key.resumed')[0]).toMatchObject({ keyId: KEY, actor: 'alice', consecutive: 2 });
    expect(events('key.resumed')[0]?.quarantinedAt).toBeTypeOf('string');
    expect((await stateOf(bench)).state.lastFailure).toMatchObject({ consecutive: 0 });

    const next = await run();
    expect(next.outcomes[0]?.result).toBe('rotated');
  });

  it('a successful manual rotation lifts the quarantine and says once that the key recovered', async () => {
    const { clock, run } = await brokenBench({ ...FAILURES, quarantineAfter: 1 });
    await run();
    clock.broken = false;
    clock.offsetMs += HOUR;
    expect((await run()).outcomes[0]).toMatchObject({ result: 'skipped', detail: 'quarantined' });
    const manual = await run({ reason: 'manual', ignoreSchedule: true, actor: 'bob' });
    expect(manual.outcomes[0]?.result).toBe('rotated');
    expect(bench.alerter.alerts.map((a) => [a.alert.severity, a.alert.errorCode, a.alert.step])).toEqual([
      ['critical', 'KR_KEY_QUARANTINED', 'preflight'],
      ['warning', 'KR_KEY_RECOVERED', 'recovery'],
    ]);
    expect(events('key.failures.cleared')).toHaveLength(1);
    // Automatic runs go on as scheduled: not quarantined, simply not due.
    expect((await run()).outcomes[0]).toMatchObject({ result: 'skipped', detail: 'not-due' });
  });

  it('a leak rotation ignores backoff and quarantine', async () => {
    const { clock, run } = await brokenBench({ ...FAILURES, quarantineAfter: 1 });
    await run();
    clock.broken = false;
    const leak = await run({ reason: 'leak', force: true, actor: 'responder' });
    expect(leak.outcomes[0]?.result).toBe('rotated');
    expect((await stateOf(bench)).state.lastFailure).toMatchObject({ consecutive: 0 });
  });

  it('a failing on-demand rotation alerts every time, even inside the backoff', async () => {
    const { run } = await brokenBench();
    await run();
    await run({ reason: 'manual', ignoreSchedule: true, actor: 'carol' });
    await run({ reason: 'manual', ignoreSchedule: true, actor: 'carol' });
    expect(bench.alerter.alerts).toHaveLength(3);
    expect(events('alert.suppressed')).toHaveLength(0);
  });

  it('an intent-marked key is never backed off or quarantined, and alerts on every run until repaired', async () => {
    const { clock, run } = await brokenBench({ ...FAILURES, quarantineAfter: 2 });
    const { primary } = await stateOf(bench);
    await primary.backend.setIntent(primary.target, {
      rotationId: 'r-died',
      keyId: KEY,
      owner: 'dead-runner',
      startedAt: new Date().toISOString(),
    });
    for (let i = 0; i < 10; i++) {
      expect((await run()).outcomes[0]).toMatchObject({ result: 'failed', step: 'preflight' });
      clock.offsetMs += 10 * 60_000;
    }
    expect(bench.alerter.alerts).toHaveLength(10);
    expect(events('key.quarantined')).toHaveLength(0);
    expect(events('alert.suppressed')).toHaveLength(0);
    const { state } = await stateOf(bench);
    expect(state.lastFailure).toMatchObject({ consecutive: 10 });
    expect(state.lastFailure?.quarantinedAt).toBeUndefined();
    expect(state.lastFailure?.nextAttemptAt).toBeUndefined();

    // Repaired by the next run once the destination is back; the streak ends with it.
    clock.broken = false;
    expect((await run()).outcomes[0]?.result).toBe('recovered');
    expect((await stateOf(bench)).state.lastFailure).toMatchObject({ consecutive: 0 });
  });
});
