// Invariant 10, as consumers see it: a consumer that re-reads its secret (through a cache) at
// least once per consumerRefresh never meets a dead secret on a two-slot entry, while consumers
// of single-key entries fail from each roll until their next refresh. The benchmark
// (bench/consumers.ts) measures the same on the real clock with the CLI; this test proves the
// behaviour on a virtual clock, step by step, so it depends on no timing: keyroll's due-ness,
// its consumerRefresh rule and every consumer's cache TTL all read the same clock, and at each
// step keyroll runs first (the engine over the file backend and the emulator, real HTTP), then
// every consumer makes one call with what its cache holds.
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Consumer, tallyByPopulation } from '../support/secret-consumer.ts';
import type { KeyPolicy } from '../../src/policy/schema.ts';
import { keyPolicy, startBench, type Bench } from './harness.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';

const MINUTE = 60_000;
const STEP = 10 * MINUTE;
/** maxAge and minInterval: every entry rotates every 50 virtual minutes (steps fall on it). */
const PERIOD = 50 * MINUTE;
/** Rotations per entry after the first store: a handful. */
const ROTATIONS = 4;
/** The last rotation, then three more steps so its consumers' failures (and recoveries) are seen. */
const END = ROTATIONS * PERIOD + 3 * STEP;
const CONSUMER_REFRESH = 50 * MINUTE;
/** Within consumerRefresh, as the rule asks of consumers. */
const TTL = 30 * MINUTE;
/** Longer than consumerRefresh: a consumer that breaks the rule (it must see failures). */
const OVERSTAYING_TTL = 150 * MINUTE;
const ORG = 'org_demo_acme';

let bench: Bench;
let clock: number;

beforeEach(async () => {
  bench = await startBench({ keys: () => [] });
  clock = Date.parse('2026-03-02T08:00:00.000Z');
  const add = (id: string): void => {
    bench.emulator.state.addApiKey({ id, name: id, organizationId: ORG });
  };
  const timing: Partial<KeyPolicy> = { maxAgeMs: PERIOD, minIntervalMs: PERIOD };
  const keys: KeyPolicy[] = [];
  for (const i of [0, 1]) {
    add(`key_single_${String(i)}`);
    keys.push(keyPolicy(`key_single_${String(i)}`, ORG, timing));
    add(`key_alt_${String(i)}a`);
    add(`key_alt_${String(i)}b`);
    keys.push(
      keyPolicy(`alt_${String(i)}`, ORG, {
        ...timing,
        slots: [`key_alt_${String(i)}a`, `key_alt_${String(i)}b`],
        consumerRefreshMs: CONSUMER_REFRESH,
      }),
    );
  }
  // The harness builds its runtime from this policy on each run; the keys need the API keys above.
  bench.policy.keys.push(...keys);
});

afterEach(async () => {
  await bench.close();
});

function consumer(population: string, entryId: string, ttlMs: number): Consumer {
  return new Consumer({
    population,
    file: join(bench.dir, 'secrets', `${entryId}.json`),
    secretField: 'apiKey',
    ttlMs,
    apiUrl: bench.emulator.url,
    now: () => clock,
  });
}

describe('consumers through a cache while keyroll rotates on its schedule', () => {
  it('slot consumers that refresh within consumerRefresh never fail; single-key consumers do', async () => {
    const consumers: { consumer: Consumer; startsAt: number }[] = [];
    // Three consumers per entry, starting 0, 10 and 20 minutes in, so their caches expire at
    // different moments relative to the rolls.
    for (const phase of [0, 1, 2]) {
      for (const i of [0, 1]) {
        consumers.push({
          consumer: consumer('single', `key_single_${String(i)}`, TTL),
          startsAt: phase * STEP,
        });
        consumers.push({
          consumer: consumer('alternating', `alt_${String(i)}`, TTL),
          startsAt: phase * STEP,
        });
      }
    }
    consumers.push({ consumer: consumer('overstaying', 'alt_0', OVERSTAYING_TTL), startsAt: 0 });

    const start = clock;
    let slotRotations = 0;
    let singleRotations = 0;
    for (let elapsed = 0; elapsed <= END; elapsed += STEP) {
      clock = start + elapsed;
      const summary = await bench.run({ runtime: { now: () => new Date(clock) } });
      expect(summary.failed).toBe(0);
      // The first run stores every entry's first secret; consumers start after it.
      if (elapsed > 0) {
        for (const outcome of summary.outcomes.filter((o) => o.result === 'rotated')) {
          if (outcome.keyId.startsWith('alt_')) slotRotations++;
          else singleRotations++;
        }
      }
      for (const { consumer: c, startsAt } of consumers) if (elapsed >= startsAt) await c.call();
    }

    const tally = tallyByPopulation(consumers.map((c) => c.consumer));
    // A handful of slot rotations per entry, each alternating: both slots were rolled.
    expect(slotRotations).toBe(2 * ROTATIONS);
    expect(singleRotations).toBe(2 * ROTATIONS);
    for (const i of [0, 1]) {
      expect(bench.emulator.state.rollCount(`key_alt_${String(i)}a`)).toBeGreaterThanOrEqual(2);
      expect(bench.emulator.state.rollCount(`key_alt_${String(i)}b`)).toBeGreaterThanOrEqual(2);
    }
    expect(tally.alternating?.calls).toBeGreaterThan(100);
    expect(tally.alternating?.unauthorized).toBe(0);
    expect(tally.alternating?.ok).toBe(tally.alternating?.calls);
    expect(tally.single?.unauthorized).toBeGreaterThan(0);
    // The rule matters: a consumer holding a value longer than consumerRefresh meets a dead slot.
    expect(tally.overstaying?.unauthorized).toBeGreaterThan(0);
    // Nothing else went wrong: every call was answered 200 or 401.
    for (const population of ['single', 'alternating', 'overstaying']) {
      expect(tally[population]?.other).toBe(0);
      expect(tally[population]?.rateLimited).toBe(0);
      expect(tally[population]?.noSecret).toBe(0);
    }
  });

  it('the consumer never puts its secret into what it reports', async () => {
    await bench.run({ runtime: { now: () => new Date(clock) } });
    const c = consumer('single', 'key_single_0', TTL);
    expect(await c.call()).toBe('ok');
    const secret = bench.emulator.state.currentSecret('key_single_0');
    expectNoSecrets([JSON.stringify(c.tally)], [secret]);
    expectNoSecrets([JSON.stringify(c.options)], [secret]);
  });
});
