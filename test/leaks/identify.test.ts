// Which key is this? identify compares the leaked value's digest with what every destination holds
// now and held before, on the engine's real file backend after real rotations against the
// emulator. Nothing it does writes the value anywhere.
import { performance } from 'node:perf_hooks';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Secret } from '../../src/audit/secret.ts';
import { BackendError } from '../../src/backends/errors.ts';
import type { Backend } from '../../src/backends/types.ts';
import { searchLeakedSecret } from '../../src/leaks/identify.ts';
import { runRotations } from '../../src/rotation/run.ts';
import type { RunTrigger } from '../../src/rotation/types.ts';
import { JSON_SHAPE, keyPolicy, startBench, type Bench } from '../rotation/harness.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';

const ENTRY = 'billing-api';
const SLOT_A = 'key_demo_billing_a';
const SLOT_B = 'key_demo_billing_b';
const BILLING = 'key_demo_billing';
const SEARCH = 'key_demo_search';
const HOUR = 3600_000;

let bench: Bench;

beforeEach(async () => {
  bench = await startBench({
    keys: (org) => [
      keyPolicy(BILLING, org(BILLING), {
        fallbacks: [{ backend: 'fallback', target: { path: 'billing.json', shape: JSON_SHAPE } }],
      }),
      keyPolicy(SEARCH, org(SEARCH)),
      keyPolicy(ENTRY, org(SLOT_A), {
        slots: [SLOT_A, SLOT_B],
        consumerRefreshMs: HOUR,
        minIntervalMs: HOUR,
        maxAgeMs: 2 * HOUR,
      }),
    ],
  });
});
afterEach(async () => {
  await bench.close();
});

async function rotate(
  keyId: string,
  trigger: RunTrigger = { reason: 'scheduled', force: false },
  offsetMs = 0,
): Promise<void> {
  const runtime = await bench.runtime({
    now: () => new Date(Date.now() + offsetMs),
    monotonicMs: () => performance.now() + offsetMs,
  });
  try {
    const summary = await runRotations(runtime, { keys: [bench.key(keyId)], trigger, concurrency: 1 });
    expect(summary.outcomes[0]?.result).toBe('rotated');
  } finally {
    await runtime.close();
  }
}

async function storedValue(keyId: string): Promise<string> {
  const runtime = await bench.runtime();
  try {
    const primary = runtime.resolveKey(bench.key(keyId)).destinations[0];
    const value = (await primary.backend.readSecret(primary.target))?.secret.reveal();
    if (value === undefined) throw new Error(`nothing stored for ${keyId}`);
    return value;
  } finally {
    await runtime.close();
  }
}

async function search(
  value: string,
  wrap?: (name: string, backend: Backend) => Backend,
): ReturnType<typeof searchLeakedSecret> {
  const runtime = await bench.runtime(wrap ? { wrapBackend: wrap } : {});
  try {
    return await searchLeakedSecret(bench.policy, runtime, new Secret(value));
  } finally {
    await runtime.close();
  }
}

function summary(result: Awaited<ReturnType<typeof searchLeakedSecret>>): unknown[] {
  return result.matches.map((m) => ({
    keyId: m.key.id,
    which: m.which,
    backend: m.destination.backendName,
    path: m.destination.target.path,
    slot: m.slot,
  }));
}

const LEAK = { reason: 'leak', force: true, actor: 'test' } as const;

describe('searchLeakedSecret', () => {
  it("the current stored value of a single key names that key, its destination and 'current'", async () => {
    await rotate(BILLING);
    await rotate(SEARCH);
    const result = await search(await storedValue(BILLING));
    expect(summary(result)).toEqual([
      { keyId: BILLING, which: 'current', backend: 'files', path: `${BILLING}.json`, slot: undefined },
    ]);
    expect(result.unread).toEqual([]);
  });

  it("the value stored before the current one names the key as 'previous'", async () => {
    await rotate(BILLING);
    const old = await storedValue(BILLING);
    await rotate(BILLING, LEAK);
    const result = await search(old);
    expect(summary(result)).toEqual([
      { keyId: BILLING, which: 'previous', backend: 'files', path: `${BILLING}.json`, slot: undefined },
    ]);
  });

  it('a slot entry: the current value is the active slot, the previous value the other slot', async () => {
    await rotate(ENTRY);
    const first = await storedValue(ENTRY);
    // Past consumerRefresh: the next scheduled rotation alternates to slot A.
    await rotate(ENTRY, { reason: 'scheduled', force: false }, 3 * HOUR);
    const second = await storedValue(ENTRY);
    expect(bench.emulator.state.isLiveSecret(SLOT_B, first)).toBe(true);
    expect(bench.emulator.state.isLiveSecret(SLOT_A, second)).toBe(true);

    expect(summary(await search(second))).toEqual([
      { keyId: ENTRY, which: 'current', backend: 'files', path: `${ENTRY}.json`, slot: SLOT_A },
    ]);
    expect(summary(await search(first))).toEqual([
      { keyId: ENTRY, which: 'previous', backend: 'files', path: `${ENTRY}.json`, slot: SLOT_B },
    ]);
  });

  it('a value no destination holds matches nothing, and every destination was read', async () => {
    await rotate(BILLING);
    await rotate(SEARCH);
    await rotate(ENTRY);
    const result = await search('not-a-secret-of-this-policy-0123456789');
    expect(result.matches).toEqual([]);
    expect(result.unread).toEqual([]);
    // 3 primaries and 1 fallback, each read for its current and (file backend) previous value.
    expect(result.searched).toBe(8);
  });

  it('a destination that cannot be read is reported, and does not hide a match in another one', async () => {
    await rotate(BILLING);
    const down = new BackendError('KR_BACKEND_UNAVAILABLE', 'down for the test', {
      backend: 'fallback',
      kind: 'file',
      operation: 'read',
      path: 'billing.json',
    });
    const failing = (name: string, backend: Backend): Backend =>
      name !== 'fallback'
        ? backend
        : new Proxy(backend, {
            get(target, property) {
              if (property === 'readSecret') return () => Promise.reject(down);
              const value: unknown = Reflect.get(target, property, target);
              return typeof value === 'function'
                ? (value as (...args: unknown[]) => unknown).bind(target)
                : value;
            },
          });
    const result = await search(await storedValue(BILLING), failing);
    expect(summary(result)).toEqual([
      { keyId: BILLING, which: 'current', backend: 'files', path: `${BILLING}.json`, slot: undefined },
    ]);
    expect(result.unread).toEqual([
      { keyId: BILLING, backend: 'fallback', path: 'billing.json', errorCode: 'KR_BACKEND_UNAVAILABLE' },
    ]);
  });

  it("a value that sits only in a key's fallback (a degraded store) is found there", async () => {
    const runtime = await bench.runtime();
    const value = bench.emulator.state.currentSecret(BILLING);
    try {
      const fallback = runtime.resolveKey(bench.key(BILLING)).fallbacks[0];
      if (!fallback) throw new Error('no fallback');
      await fallback.backend.writeSecret(fallback.target, {
        secret: new Secret(value),
        keyId: BILLING,
        organizationId: bench.orgOf(BILLING),
        rotationId: 'r-test',
        rotatedAt: new Date().toISOString(),
      });
      const { matches } = await searchLeakedSecret(bench.policy, runtime, new Secret(value));
      expect(matches.map((m) => [m.key.id, m.destination.backendName, m.which])).toEqual([
        [BILLING, 'fallback', 'current'],
      ]);
    } finally {
      await runtime.close();
    }
  });

  it('writes nothing about the value: no audit line, and a match names only ids and places', async () => {
    await rotate(ENTRY);
    const value = await storedValue(ENTRY);
    const before = bench.lines.length;
    const result = await search(value);
    expect(bench.lines.length).toBe(before);
    const rendered = JSON.stringify(summary(result));
    expectNoSecrets([rendered, ...bench.lines], [value]);
  });
});
