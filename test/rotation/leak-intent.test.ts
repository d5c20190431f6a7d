// Invariant 6 for a leak (issue 30's gap): a leak rotation that died after its intent marker and
// before its roll leaves the leaked value stored and working. Its marker records the reason and
// the fingerprint of the value stored then (src/rotation/leak-marker.ts), so recovery re-rolls at
// once while that same value is stored, and recovers as any marker once another value is stored
// (a secret the operator put back by hand: test/cli/escrow-drill.test.ts, the case below).
// test/faults/leak-intent.test.ts runs the same with a SIGKILLed child.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Secret } from '../../src/audit/secret.ts';
import type { Intent } from '../../src/backends/types.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { startBench, wrapBackend, type Bench } from './harness.ts';

const KEY = 'key_demo_billing';
let bench: Bench;

beforeEach(async () => {
  bench = await startBench();
});
afterEach(async () => {
  await bench.close();
});

async function primaryOf(): Promise<{
  stored: () => Promise<string | undefined>;
  intent: () => Promise<Intent | undefined>;
  setIntent: (intent: Intent) => Promise<void>;
  close: () => Promise<void>;
}> {
  const runtime = await bench.runtime();
  const { primary } = runtime.resolveKey(bench.key(KEY));
  return {
    stored: async () => (await primary.backend.readSecret(primary.target))?.secret.reveal(),
    intent: async () => (await primary.backend.readState(primary.target)).intent,
    setIntent: (intent) => primary.backend.setIntent(primary.target, intent),
    close: () => runtime.close(),
  };
}

/**
 * The marker a `rotate --reason leak` that died at its roll leaves: what prepareRoll writes (the
 * first case checks it does), for the value stored now. A recent rotation, so nothing is due.
 */
async function leaveLeakMarker(): Promise<string> {
  await bench.run({ keys: [KEY] });
  const primary = await primaryOf();
  try {
    const leaked = await primary.stored();
    if (leaked === undefined) throw new Error('nothing stored');
    await primary.setIntent({
      rotationId: 'r-leak-died',
      keyId: KEY,
      owner: 'dead-runner',
      startedAt: new Date().toISOString(),
      reason: 'leak',
      storedFingerprint: new Secret(leaked).fingerprint(),
    });
    return leaked;
  } finally {
    await primary.close();
  }
}

describe('a leak rotation that died after its intent marker, before its roll', () => {
  it("writes a marker with the leak's reason and the stored value's fingerprint; a manual one writes neither and reads no value for it", async () => {
    await bench.run({ keys: [KEY] });
    const primary = await primaryOf();
    const before = await primary.stored();
    const markers: Intent[] = [];
    const readsBeforeMarker: string[] = [];
    const runtime = {
      wrapBackend: (name: string, inner: Parameters<typeof wrapBackend>[0]) =>
        name !== 'files'
          ? inner
          : wrapBackend(inner, {
              readSecret: (next) => {
                if (markers.length === 0) readsBeforeMarker.push('readSecret');
                return next();
              },
              setIntent: (next, _target, intent) => {
                markers.push(intent);
                return next();
              },
            }),
    };
    await bench.run({ keys: [KEY], trigger: { reason: 'leak', force: true }, runtime });
    expect(markers).toEqual([
      expect.objectContaining({
        reason: 'leak',
        storedFingerprint: new Secret(String(before)).fingerprint(),
      }),
    ]);
    expect(readsBeforeMarker).toEqual(['readSecret']);

    markers.length = 0;
    readsBeforeMarker.length = 0;
    await bench.run({ keys: [KEY], trigger: { reason: 'manual', force: true }, runtime });
    expect(markers).toHaveLength(1);
    expect(markers[0]).not.toHaveProperty('reason');
    expect(markers[0]).not.toHaveProperty('storedFingerprint');
    expect(readsBeforeMarker).toEqual([]);
    await primary.close();
  });

  it('the next scheduled run re-rolls at once while the leaked value is stored, and proves it dead (KR_RECOVERED_LEAK)', async () => {
    const leaked = await leaveLeakMarker();
    const rollsBefore = bench.emulator.state.rollCount(KEY);

    const summary = await bench.run({ keys: [KEY] });

    expect(summary.outcomes[0]).toMatchObject({ result: 'recovered' });
    expect(bench.emulator.state.rollCount(KEY)).toBe(rollsBefore + 1);
    expect(bench.emulator.state.isLiveSecret(KEY, leaked)).toBe(false);
    const primary = await primaryOf();
    const now = await primary.stored();
    expect(now !== undefined && bench.emulator.state.isLiveSecret(KEY, now)).toBe(true);
    expect(await primary.intent()).toBeUndefined();
    await primary.close();
    expect(bench.alerter.alerts.map(({ alert }) => alert.errorCode)).toEqual(['KR_RECOVERED_LEAK']);
    expect(bench.events().filter((e) => e.event === 'key.recovered')).toEqual([
      expect.objectContaining({
        result: 'rerolled',
        why: 'leak-not-rolled',
        leakReason: 'leak',
        leakedValueDead: true,
      }),
    ]);
    expectNoSecrets(bench.lines, bench.emulator.state.mintedSecrets(), 'the audit trail');
  });

  it('a different working value written by hand since the marker is recovered as today: cleared, not re-rolled (KR_RECOVERED_INTENT)', async () => {
    const leaked = await leaveLeakMarker();
    // The operator answers the leak by hand: rolls the key in the dashboard and writes the new
    // secret into the destination, in the key's shape.
    const byHand = bench.emulator.state.rollKey(KEY);
    await writeFile(
      join(bench.dir, 'secrets', `${KEY}.json`),
      `${JSON.stringify({ apiKey: byHand, keyId: KEY, organizationId: bench.orgOf(KEY), rotatedAt: new Date().toISOString() })}\n`,
      { mode: 0o600 },
    );
    const rollsBefore = bench.emulator.state.rollCount(KEY);

    const summary = await bench.run({ keys: [KEY] });

    expect(summary.outcomes[0]).toMatchObject({ result: 'recovered', detail: 'stored-secret-works' });
    expect(bench.emulator.state.rollCount(KEY)).toBe(rollsBefore);
    expect(bench.emulator.state.isLiveSecret(KEY, byHand)).toBe(true);
    expect(bench.emulator.state.isLiveSecret(KEY, leaked)).toBe(false);
    const primary = await primaryOf();
    expect(await primary.stored()).toBe(byHand);
    expect(await primary.intent()).toBeUndefined();
    await primary.close();
    expect(bench.alerter.alerts.map(({ alert }) => alert.errorCode)).toEqual(['KR_RECOVERED_INTENT']);
  });

  it('a leak marker that recorded no stored value (nothing was stored then) is recovered as today', async () => {
    await bench.run({ keys: [KEY] });
    const primary = await primaryOf();
    await primary.setIntent({
      rotationId: 'r-leak-empty',
      keyId: KEY,
      owner: 'dead-runner',
      startedAt: new Date().toISOString(),
      reason: 'leak',
    });
    await primary.close();
    const rollsBefore = bench.emulator.state.rollCount(KEY);
    const summary = await bench.run({ keys: [KEY] });
    expect(summary.outcomes[0]).toMatchObject({ result: 'recovered', detail: 'stored-secret-works' });
    expect(bench.emulator.state.rollCount(KEY)).toBe(rollsBefore);
  });
});
