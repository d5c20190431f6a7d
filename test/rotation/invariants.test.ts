// One or more tests per invariant of docs/design.md, each trying to break it. The invariant's number
// is in the test name.
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BackendError } from '../../src/backends/errors.ts';
import type { Backend } from '../../src/backends/types.ts';
import { runRotations } from '../../src/rotation/run.ts';
import { keyPolicy, startBench, wrapBackend, type Bench } from './harness.ts';

let bench: Bench;
afterEach(async () => {
  await bench.close();
});

const KEY = 'key_demo_billing';
const unavailable = (operation: 'write' | 'preflight'): BackendError =>
  new BackendError('KR_BACKEND_UNAVAILABLE', 'injected: backend down', {
    backend: 'files',
    kind: 'file',
    operation,
    path: 'x',
  });

async function storedApiKey(dir: string, sub: string, file: string): Promise<string> {
  return (JSON.parse(await readFile(join(dir, sub, file), 'utf8')) as { apiKey: string }).apiKey;
}

describe('invariant 1: no roll without a writable destination', () => {
  beforeEach(async () => {
    bench = await startBench();
  });

  it('invariant 1: a destination whose directory cannot be created fails preflight and nothing is rolled', async () => {
    // A regular file where the backend expects its directory: unwritable even for root.
    await writeFile(join(bench.dir, 'secrets'), 'not a directory');
    const summary = await bench.run({ keys: [KEY] });
    expect(summary.outcomes[0]).toMatchObject({ result: 'failed', step: 'preflight' });
    expect(bench.emulator.state.rollCount(KEY)).toBe(0);
    expect(bench.alerter.alerts).toHaveLength(1);
    expect(bench.events().some((e) => e.event === 'key.failed' && e.step === 'preflight')).toBe(true);
  });

  it('invariant 1: a second destination that is down blocks the roll of the key', async () => {
    bench.policy.keys = [
      keyPolicy(KEY, bench.orgOf(KEY), {
        destinations: [
          {
            backend: 'files',
            target: { path: 'a.json', shape: { format: 'json', secretField: 'apiKey', fields: [] } },
          },
          {
            backend: 'fallback',
            target: { path: 'b.json', shape: { format: 'raw', secretField: 'apiKey', fields: [] } },
          },
        ],
      }),
    ];
    const summary = await bench.run({
      runtime: {
        wrapBackend: (name, b) =>
          name === 'fallback'
            ? wrapBackend(b, { preflight: () => Promise.reject(unavailable('preflight')) })
            : b,
      },
    });
    expect(summary.failed).toBe(1);
    expect(bench.emulator.state.rollCount(KEY)).toBe(0);
  });
});

describe('invariant 2: secret first', () => {
  beforeEach(async () => {
    bench = await startBench();
  });

  it('invariant 2: between the roll answer and the write nothing else does I/O (no audit line, alert or other call)', async () => {
    const trail: string[] = [];
    const runtime = await bench.runtime({
      wrapBackend: (_name, b) => {
        const observed: Partial<Record<keyof Backend, unknown>> = {};
        for (const op of [
          'preflight',
          'acquireLock',
          'releaseLock',
          'setIntent',
          'clearIntent',
          'writeSecret',
          'readSecret',
          'readState',
          'recordRotation',
          'recordFailure',
        ] as const) {
          observed[op] = (next: () => Promise<unknown>) => {
            trail.push(`backend.${op}`);
            return next();
          };
        }
        return wrapBackend(b, observed as Parameters<typeof wrapBackend>[1]);
      },
    });
    const api = runtime.api;
    const originalRoll = api.rollKey.bind(api);
    api.rollKey = async (...args) => {
      const result = await originalRoll(...args);
      trail.push('roll.answered');
      return result;
    };
    bench.onAuditLine((line) => trail.push(`audit.${(JSON.parse(line) as { event: string }).event}`));
    try {
      await runRotations(runtime, { keys: [bench.key(KEY)], trigger: { reason: 'manual', force: true } });
    } finally {
      await runtime.close();
    }
    const answered = trail.indexOf('roll.answered');
    expect(answered).toBeGreaterThan(0);
    expect(trail[answered + 1]).toBe('backend.writeSecret');
  });

  it('invariant 2: store retries are audited only after the write landed', async () => {
    let failures = 2;
    const trail: string[] = [];
    bench.onAuditLine((line) => trail.push((JSON.parse(line) as { event: string }).event));
    const summary = await bench.run({
      keys: [KEY],
      runtime: {
        wrapBackend: (_n, b) =>
          wrapBackend(b, {
            writeSecret: (next) => {
              trail.push('write');
              if (failures-- > 0) return Promise.reject(unavailable('write'));
              return next();
            },
          }),
      },
    });
    expect(summary.rotated).toBe(1);
    const lastWrite = trail.lastIndexOf('write');
    expect(trail.indexOf('key.store.retry')).toBeGreaterThan(lastWrite);
    expect(trail.indexOf('key.rolled')).toBeGreaterThan(lastWrite);
  });
});

describe('invariant 4: never lost silently', () => {
  beforeEach(async () => {
    bench = await startBench({
      keys: (org) => [
        keyPolicy(KEY, org(KEY), {
          fallbacks: [
            {
              backend: 'fallback',
              target: {
                path: `${KEY}.json`,
                shape: { format: 'json', secretField: 'apiKey', fields: ['keyId'] },
              },
            },
          ],
        }),
      ],
    });
  });

  const primaryDown = (name: string, b: Backend): Backend =>
    name === 'files' ? wrapBackend(b, { writeSecret: () => Promise.reject(unavailable('write')) }) : b;

  it('invariant 4: a destination that stays down is retried (bounded), then the fallback takes the secret, critical alert', async () => {
    let attempts = 0;
    const summary = await bench.run({
      runtime: {
        wrapBackend: (name, b) =>
          name === 'files'
            ? wrapBackend(b, {
                writeSecret: () => {
                  attempts++;
                  return Promise.reject(unavailable('write'));
                },
              })
            : b,
      },
    });
    expect(attempts).toBe(3);
    expect(summary.outcomes[0]).toMatchObject({ result: 'failed', step: 'store', degraded: true });
    expect(
      bench.emulator.state.isLiveSecret(KEY, await storedApiKey(bench.dir, 'fallback', `${KEY}.json`)),
    ).toBe(true);
    expect(bench.alerter.alerts).toHaveLength(1);
    expect(bench.alerter.alerts[0]?.alert.severity).toBe('critical');
    expect(bench.alerter.alerts[0]?.alert.summary).toContain('fallback');
  });

  it('invariant 4: with every destination and fallback down the alert says the key is unusable, and the next run re-rolls it', async () => {
    const allDown = (_name: string, b: Backend): Backend =>
      wrapBackend(b, { writeSecret: () => Promise.reject(unavailable('write')) });
    const first = await bench.run({ runtime: { wrapBackend: allDown } });
    expect(first.outcomes[0]).toMatchObject({ result: 'failed', step: 'store' });
    expect(bench.alerter.alerts[0]?.alert.summary).toMatch(/UNUSABLE/);
    expect(bench.alerter.alerts[0]?.alert.nextAction).toMatch(/next run re-rolls/);
    expect(bench.events().some((e) => e.event === 'key.unusable')).toBe(true);

    const second = await bench.run();
    expect(second.outcomes[0]?.result).toBe('recovered');
    expect(bench.emulator.state.rollCount(KEY)).toBe(2);
    expect(
      bench.emulator.state.isLiveSecret(KEY, await storedApiKey(bench.dir, 'secrets', `${KEY}.json`)),
    ).toBe(true);
  });

  it('invariant 4: a refused write (not retryable) goes to the fallback without waiting out the retries', async () => {
    let attempts = 0;
    const denied = new BackendError('KR_BACKEND_DENIED', 'injected: denied', {
      backend: 'files',
      kind: 'file',
      operation: 'write',
      path: 'x',
    });
    await bench.run({
      runtime: {
        wrapBackend: (name, b) =>
          name === 'files'
            ? wrapBackend(b, {
                writeSecret: () => {
                  attempts++;
                  return Promise.reject(denied);
                },
              })
            : primaryDown(name, b),
      },
    });
    expect(attempts).toBe(1);
    expect(
      bench.emulator.state.isLiveSecret(KEY, await storedApiKey(bench.dir, 'fallback', `${KEY}.json`)),
    ).toBe(true);
  });
});

describe('invariant 5: one roll at a time per key', () => {
  beforeEach(async () => {
    bench = await startBench();
  });

  it('invariant 5: two runners at once roll each due key exactly once', async () => {
    const [a, b] = await Promise.all([bench.run(), bench.run()]);
    expect(a.rotated + b.rotated).toBe(3);
    for (const key of ['key_demo_billing', 'key_demo_search', 'key_demo_ingest']) {
      expect(bench.emulator.state.rollCount(key)).toBe(1);
    }
  });

  it('invariant 5: a lock held by another runner is not taken before its TTL', async () => {
    const rt = await bench.runtime();
    const { destinations } = rt.resolveKey(bench.key(KEY));
    const primary = destinations[0];
    const held = await primary.backend.acquireLock(primary.target, {
      owner: 'other-runner',
      rotationId: 'r-other',
      ttlMs: 60_000,
    });
    expect(held.acquired).toBe(true);
    await rt.close();
    const summary = await bench.run({ keys: [KEY], trigger: { reason: 'leak', force: true } });
    expect(summary.outcomes[0]?.result).toBe('busy');
    expect(summary.exitCode).toBe(3);
    expect(bench.emulator.state.rollCount(KEY)).toBe(0);
  });

  it('invariant 5: a stale lock is taken over after its TTL', async () => {
    const rt = await bench.runtime({ now: () => new Date(Date.now() - 3600_000) });
    const { destinations } = rt.resolveKey(bench.key(KEY));
    const primary = destinations[0];
    await primary.backend.acquireLock(primary.target, {
      owner: 'dead-runner',
      rotationId: 'r-dead',
      ttlMs: 60_000,
    });
    await rt.close();
    const summary = await bench.run({ keys: [KEY] });
    expect(summary.outcomes[0]?.result).toBe('rotated');
    expect(bench.events().find((e) => e.event === 'key.lock.acquired')).toMatchObject({ tookOver: true });
  });

  it('invariant 5: the minimum interval stops a second rotation; a leak rotation bypasses it', async () => {
    await bench.run({ keys: [KEY] });
    const again = await bench.run({ keys: [KEY], trigger: { reason: 'manual', force: false } });
    expect(again.outcomes[0]?.result).toBe('skipped');
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    const leak = await bench.run({ keys: [KEY], trigger: { reason: 'leak', force: true, actor: 'alice' } });
    expect(leak.outcomes[0]?.result).toBe('rotated');
    expect(bench.emulator.state.rollCount(KEY)).toBe(2);
    expect(
      bench
        .events()
        .filter((e) => e.event === 'key.rolled')
        .at(-1),
    ).toMatchObject({ actor: 'alice', reason: 'leak' });
  });
});

describe('invariant 6: crash-safe', () => {
  beforeEach(async () => {
    bench = await startBench();
  });

  async function leaveIntent(): Promise<void> {
    const rt = await bench.runtime();
    const primary = rt.resolveKey(bench.key(KEY)).destinations[0];
    await primary.backend.setIntent(primary.target, {
      rotationId: 'r-died',
      keyId: KEY,
      owner: 'dead-runner',
      startedAt: new Date().toISOString(),
    });
    await rt.close();
  }

  it('invariant 6: a run that died after the roll (stored secret dead) is re-rolled at once and alerted', async () => {
    await bench.run({ keys: [KEY] });
    await leaveIntent();
    bench.emulator.state.revokeKey(KEY); // the roll that died killed the stored secret
    const summary = await bench.run({ keys: [KEY] });
    expect(summary.outcomes[0]?.result).toBe('recovered');
    expect(bench.emulator.state.rollCount(KEY)).toBe(2);
    expect(
      bench.emulator.state.isLiveSecret(KEY, await storedApiKey(bench.dir, 'secrets', `${KEY}.json`)),
    ).toBe(true);
    expect(bench.alerter.alerts.map((a) => a.alert.errorCode)).toEqual(['KR_RECOVERED_REROLL']);
    const rt = await bench.runtime();
    const primary = rt.resolveKey(bench.key(KEY)).destinations[0];
    expect((await primary.backend.readState(primary.target)).intent).toBeUndefined();
    await rt.close();
  });

  it('invariant 6: a run that died before the roll (stored secret works) is cleared without a roll', async () => {
    await bench.run({ keys: [KEY] });
    await leaveIntent();
    const summary = await bench.run({ keys: [KEY] });
    expect(summary.outcomes[0]).toMatchObject({ result: 'recovered', detail: 'stored-secret-works' });
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    expect(bench.alerter.alerts.map((a) => a.alert.errorCode)).toEqual(['KR_RECOVERED_INTENT']);
  });

  it('invariant 6: an unknown roll outcome past the budget leaves the intent for the next run', async () => {
    bench.emulator.faults.inject('roll', { kind: 'failAfterApply', then: 'status500' }, 10);
    const summary = await bench.run({
      keys: [KEY],
      runtime: { rollBudget: { attempts: 2, maxWaitMs: 1000 } },
    });
    expect(summary.outcomes[0]).toMatchObject({ result: 'failed', step: 'roll' });
    bench.emulator.faults.clear();
    const next = await bench.run({ keys: [KEY] });
    expect(next.outcomes[0]?.result).toBe('recovered');
    expect(
      bench.emulator.state.isLiveSecret(KEY, await storedApiKey(bench.dir, 'secrets', `${KEY}.json`)),
    ).toBe(true);
  });
});

describe('invariant 7: every failure is visible', () => {
  beforeEach(async () => {
    bench = await startBench();
  });

  it('invariant 7: a failed step emits key.failed with step, code and next action, and exactly one alert', async () => {
    bench.emulator.faults.inject('roll', { kind: 'status', status: 404 }, 1);
    const summary = await bench.run({ keys: [KEY] });
    expect(summary.exitCode).toBe(1);
    const failed = bench.events().filter((e) => e.event === 'key.failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({ keyId: KEY, step: 'roll', errorCode: 'KR_API_NOT_FOUND' });
    expect(failed[0]?.nextAction).toEqual(expect.any(String));
    expect(bench.alerter.alerts).toHaveLength(1);
  });

  it('invariant 7: a verify failure is reported although the secret is stored', async () => {
    const summary = await bench.run({
      keys: [KEY],
      runtime: { wrapBackend: (_n, b) => wrapBackend(b, { readSecret: () => Promise.resolve(undefined) }) },
    });
    expect(summary.outcomes[0]).toMatchObject({
      result: 'failed',
      step: 'verify',
      errorCode: 'KR_VERIFY_DIGEST_MISMATCH',
    });
    expect(bench.alerter.alerts).toHaveLength(1);
  });
});

describe('invariant 8: idempotent writes', () => {
  beforeEach(async () => {
    bench = await startBench();
  });

  it('invariant 8: a write that landed but answered with an error is retried without a second version', async () => {
    let first = true;
    const summary = await bench.run({
      keys: [KEY],
      runtime: {
        wrapBackend: (_n, b) =>
          wrapBackend(b, {
            writeSecret: async (next) => {
              const result = await next();
              if (first) {
                first = false;
                throw unavailable('write');
              }
              return result;
            },
          }),
      },
    });
    expect(summary.rotated).toBe(1);
    const stored = bench.events().find((e) => e.event === 'key.stored');
    expect(stored).toMatchObject({ attempts: 2, alreadyApplied: true });
  });
});

describe('keys without state', () => {
  it('a fresh directory is created for the file backend', async () => {
    bench = await startBench();
    await mkdir(join(bench.dir, 'secrets'), { recursive: true });
    const summary = await bench.run();
    expect(summary.rotated).toBe(3);
  });
});
