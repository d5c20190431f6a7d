// The one decision the daemon's leak intake and `keyroll rotate --leaked-secret-stdin` share: a
// leaked value is rotated only when the API does not already refuse it, whether it was found as a
// destination's current value or its previous one (a leak is rotated once).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Secret } from '../../src/audit/secret.ts';
import { needsLeakRotation } from '../../src/leaks/previous-value.ts';
import type { Runtime } from '../../src/rotation/runtime.ts';
import { keyPolicy, startBench, type Bench } from '../rotation/harness.ts';

const BILLING = 'key_demo_billing';

let bench: Bench;
let runtime: Runtime;

beforeEach(async () => {
  bench = await startBench({ keys: (org) => [keyPolicy(BILLING, org(BILLING))] });
  runtime = await bench.runtime();
});
afterEach(async () => {
  await runtime.close();
  await bench.close();
});

describe('needsLeakRotation', () => {
  it('a current value the API already refuses (rolled since, elsewhere) needs no rotation', async () => {
    const leaked = new Secret(bench.emulator.state.currentSecret(BILLING));
    bench.emulator.state.rollKey(BILLING);
    const key = bench.policy.keys[0];
    if (key === undefined) throw new Error('the bench has one key');
    const found = { key, which: 'current' as const };
    expect(await needsLeakRotation(runtime, found, leaked)).toBe(false);
  });

  it('a live value needs a rotation', async () => {
    const leaked = new Secret(bench.emulator.state.currentSecret(BILLING));
    const key = bench.policy.keys[0];
    if (key === undefined) throw new Error('the bench has one key');
    const found = { key, which: 'current' as const };
    expect(await needsLeakRotation(runtime, found, leaked)).toBe(true);
  });
});
