// Invariant 9 for every write a lease covers (issue 18, "only the primary write is fenced"): a key
// holds one lock per destination, and every write of the new secret to a destination (the store
// step's, recovery's repair copies) carries that destination's lock as its fence. A write refused
// for a lost lock ends the store: nothing more goes anywhere, fallback and escrow included.
// Fallbacks hold no lock of the key: their copy is written unfenced, and the alert says so.
// Two runners are two runtimes on the same files and emulator; the second one's clock runs past
// the first one's lock, which is what a paused holder looks like from outside.
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { Secret } from '../../src/audit/secret.ts';
import type { Backend, WriteFence } from '../../src/backends/types.ts';
import type { KeyPolicy } from '../../src/policy/schema.ts';
import { runRotations, type RunSummary } from '../../src/rotation/run.ts';
import type { RuntimeOptions } from '../../src/rotation/runtime.ts';
import type { RunTrigger } from '../../src/rotation/types.ts';
import { JSON_SHAPE, keyPolicy, startBench, wrapBackend, type Bench } from './harness.ts';

const KEY = 'key_demo_billing';
const LEAK: RunTrigger = { reason: 'leak', force: true, actor: 'test' };
const SECOND = `${KEY}.second.json`;

let bench: Bench | undefined;
afterEach(async () => {
  await bench?.close();
  bench = undefined;
});

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** A runner whose clocks run `offsetMs` ahead of the real ones. */
function ahead(offsetMs: number): Pick<RuntimeOptions, 'now' | 'monotonicMs'> {
  return { now: () => new Date(Date.now() + offsetMs), monotonicMs: () => performance.now() + offsetMs };
}

async function runAs(
  b: Bench,
  options: Partial<RuntimeOptions>,
  trigger: RunTrigger = LEAK,
): Promise<RunSummary> {
  const runtime = await b.runtime(options);
  try {
    return await runRotations(runtime, { keys: [b.key(KEY)], trigger, concurrency: 1 });
  } finally {
    await runtime.close();
  }
}

async function apiKeyIn(b: Bench, sub: string, file: string): Promise<string> {
  return (JSON.parse(await readFile(join(b.dir, sub, file), 'utf8')) as { apiKey: string }).apiKey;
}

/** Runner A, paused (SIGSTOP, a GC pause) right before it writes `path` of backend `backend`. */
function pausedBefore(
  b: Bench,
  backend: string,
  path: string,
): { reached: Promise<void>; resume: () => void; result: Promise<RunSummary> } {
  const reached = deferred();
  const resume = deferred();
  const result = runAs(b, {
    wrapBackend: (name, inner) =>
      name !== backend
        ? inner
        : wrapBackend(inner, {
            writeSecret: async (next, target) => {
              if (target.path === path) {
                reached.resolve();
                await resume.promise;
              }
              return next();
            },
          }),
  });
  return { reached: reached.promise, resume: resume.resolve, result };
}

const withSecond = (org: (id: string) => string): KeyPolicy[] => [
  keyPolicy(KEY, org(KEY), {
    destinations: [
      { backend: 'files', target: { path: `${KEY}.json`, shape: JSON_SHAPE } },
      { backend: 'fallback', target: { path: SECOND, shape: JSON_SHAPE } },
    ],
  }),
];

describe('invariant 9: every destination write is fenced by its own lock', () => {
  it('a runner paused before its write to the second destination writes nothing there once its locks were taken over', async () => {
    const b = (bench = await startBench({ keys: withSecond }));
    const ttl = b.key(KEY).lockTtlMs;
    // A stores at the primary, then freezes before the second destination.
    const a = pausedBefore(b, 'fallback', SECOND);
    await a.reached;
    // B, past A's locks by its clock: takes both over, rolls (A's secret dies) and stores everywhere.
    const rotatedByB = await runAs(b, ahead(ttl + 1_000));
    expect(rotatedByB.outcomes[0]).toMatchObject({ result: 'rotated' });
    const storedByB = await apiKeyIn(b, 'fallback', SECOND);
    expect(b.emulator.state.isLiveSecret(KEY, storedByB)).toBe(true);

    a.resume();
    const byA = await a.result;
    expect(byA.outcomes[0]).toMatchObject({ result: 'failed', step: 'store', errorCode: 'KR_LOCK_LOST' });
    // The second destination keeps B's live secret, and so does the primary.
    expect(await apiKeyIn(b, 'fallback', SECOND)).toBe(storedByB);
    expect(await apiKeyIn(b, 'secrets', `${KEY}.json`)).toBe(storedByB);
    const alert = b.alerter.alerts.find(({ alert: sent }) => sent.errorCode === 'KR_LOCK_LOST')?.alert;
    expect(alert).toMatchObject({ severity: 'critical', step: 'store' });
    expect(alert?.summary).toContain(`fallback:${SECOND}`);
  });

  it('takes a lock at every destination before the roll, and gives every one back', async () => {
    const b = (bench = await startBench({ keys: withSecond }));
    const taken: string[] = [];
    const released: string[] = [];
    const summary = await runAs(b, {
      wrapBackend: (name, inner) =>
        wrapBackend(inner, {
          acquireLock: (next, target) => {
            taken.push(`${name}:${target.path}`);
            return next();
          },
          releaseLock: (next, target) => {
            released.push(`${name}:${target.path}`);
            return next();
          },
        }),
    });
    expect(summary.outcomes[0]).toMatchObject({ result: 'rotated' });
    expect(taken).toEqual([`files:${KEY}.json`, `fallback:${SECOND}`]);
    expect(released).toEqual([`fallback:${SECOND}`, `files:${KEY}.json`]);
    expect(b.events().find((e) => e.event === 'key.lock.acquired')).toMatchObject({ locks: 2 });
  });

  it('refreshes every lock once the primary holds the secret, before the second destination is written', async () => {
    const b = (bench = await startBench({ keys: withSecond }));
    const trail: string[] = [];
    const summary = await runAs(b, {
      wrapBackend: (name, inner) =>
        wrapBackend(inner, {
          writeSecret: (next, target) => {
            trail.push(`write ${name}:${target.path}`);
            return next();
          },
          refreshLock: (next, target) => {
            trail.push(`refresh ${name}:${target.path}`);
            return next();
          },
        }),
    });
    expect(summary.outcomes[0]).toMatchObject({ result: 'rotated' });
    expect(trail.slice(0, 4)).toEqual([
      `write files:${KEY}.json`,
      `refresh files:${KEY}.json`,
      `refresh fallback:${SECOND}`,
      `write fallback:${SECOND}`,
    ]);
  });

  it("finds the key busy when another runner holds the second destination's lock, and gives the primary's back", async () => {
    const b = (bench = await startBench({ keys: withSecond }));
    const runtime = await b.runtime();
    try {
      const second = runtime.resolveKey(b.key(KEY)).destinations[1];
      if (!second) throw new Error('no second destination');
      const held = await second.backend.acquireLock(second.target, {
        owner: 'someone-else',
        rotationId: 'r-else',
        ttlMs: 60_000,
      });
      expect(held.acquired).toBe(true);
      const summary = await runAs(b, {});
      expect(summary.outcomes[0]).toMatchObject({ result: 'busy' });
      expect(b.emulator.state.rollCount(KEY)).toBe(0);
      const primary = runtime.resolveKey(b.key(KEY)).destinations[0];
      expect((await primary.backend.readState(primary.target)).lock).toBeUndefined();
    } finally {
      await runtime.close();
    }
  });

  it("repairs a destination during recovery with a write fenced by that destination's lock", async () => {
    const b = (bench = await startBench({ keys: withSecond }));
    expect((await runAs(b, {})).outcomes[0]).toMatchObject({ result: 'rotated' });
    // A run died mid-rotation (its marker stays), and the second destination holds something else.
    const runtime = await b.runtime();
    try {
      const [primary, second] = runtime.resolveKey(b.key(KEY)).destinations;
      if (!second) throw new Error('two destinations expected');
      await primary.backend.setIntent(primary.target, {
        rotationId: 'r-died',
        keyId: KEY,
        owner: 'host/1/died',
        startedAt: new Date().toISOString(),
      });
      await second.backend.writeSecret(second.target, {
        secret: new Secret('sk_stale_copy_of_the_secret_0001'),
        keyId: KEY,
        organizationId: b.orgOf(KEY),
        rotationId: 'r-stale',
        rotatedAt: new Date().toISOString(),
      });
    } finally {
      await runtime.close();
    }
    const fences: (WriteFence | undefined)[] = [];
    const summary = await runAs(
      b,
      {
        wrapBackend: (name, inner): Backend =>
          name !== 'fallback'
            ? inner
            : wrapBackend(inner, {
                writeSecret: (next, _target, _record, fence) => {
                  fences.push(fence);
                  return next();
                },
              }),
      },
      { reason: 'scheduled', force: false },
    );
    expect(summary.outcomes[0]).toMatchObject({ result: 'recovered' });
    expect(fences).toHaveLength(1);
    expect(fences[0]?.lock.owner).toBeDefined();
    expect(await apiKeyIn(b, 'fallback', SECOND)).toBe(await apiKeyIn(b, 'secrets', `${KEY}.json`));
  });
});

describe('invariant 9: a lost lock ends the store; fallbacks are unfenced and say so', () => {
  const withFallback = (org: (id: string) => string): KeyPolicy[] => [
    keyPolicy(KEY, org(KEY), {
      fallbacks: [{ backend: 'fallback', target: { path: `${KEY}.json`, shape: JSON_SHAPE } }],
    }),
  ];

  it('sends nothing to the fallback after the primary refused the write for a lost lock', async () => {
    const b = (bench = await startBench({ keys: withFallback }));
    const ttl = b.key(KEY).lockTtlMs;
    const a = pausedBefore(b, 'files', `${KEY}.json`);
    await a.reached;
    expect((await runAs(b, ahead(ttl + 1_000))).outcomes[0]).toMatchObject({ result: 'recovered' });
    a.resume();
    expect((await a.result).outcomes[0]).toMatchObject({
      result: 'failed',
      step: 'store',
      errorCode: 'KR_LOCK_LOST',
    });
    // Nothing of A's reached the fallback.
    await expect(stat(join(b.dir, 'fallback', `${KEY}.json`))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(b.events().some((e) => e.event === 'key.store.fallback')).toBe(false);
    const alert = b.alerter.alerts.find(({ alert: sent }) => sent.errorCode === 'KR_LOCK_LOST')?.alert;
    expect(alert?.summary).toContain('nothing more was written, to no destination, fallback or escrow');
    expect(b.events().some((e) => e.event === 'key.unusable')).toBe(false);
  });

  it('alerts that a fallback copy was written without a lock fence', async () => {
    const b = (bench = await startBench({ keys: withFallback }));
    const down = new Error('injected: down');
    Object.assign(down, { code: 'KR_BACKEND_UNAVAILABLE', retryable: true });
    const summary = await runAs(b, {
      wrapBackend: (name, inner) =>
        name === 'files' ? wrapBackend(inner, { writeSecret: () => Promise.reject(down) }) : inner,
    });
    expect(summary.outcomes[0]).toMatchObject({ result: 'failed', step: 'store', degraded: true });
    const alert = b.alerter.alerts[0]?.alert;
    expect(alert).toMatchObject({ severity: 'critical', details: { unfenced: [`fallback:${KEY}.json`] } });
    expect(alert?.summary).toContain('written without a lock fence');
    expect(b.events().find((e) => e.event === 'key.failed')).toMatchObject({
      unfenced: [`fallback:${KEY}.json`],
    });
  });
});
