// The narrowed generation a failed build leaves in force when RotatedKeys were deleted
// (src/daemon/object-deletions.ts; end to end in test/integration/kube-crd-daemon.test.ts): it
// rotates the policy without the deleted keys on the runtime of the generation it replaces, and
// that runtime is closed once, only when the runs of both generations are over, so the swap never
// cuts a rotation between its roll and its store.
import { describe, expect, it } from 'vitest';
import type { Policy } from '../../src/policy/schema.ts';
import type { Runtime } from '../../src/rotation/runtime.ts';
import { Generation } from '../../src/scheduler/generation.ts';
import { narrowedGeneration, policyWithout } from '../../src/daemon/object-deletions.ts';
import { keyPolicy } from '../rotation/harness.ts';

const policy = {
  file: 'objects',
  keys: [keyPolicy('key_billing', 'org_acme'), keyPolicy('key_search', 'org_acme')],
} as Partial<Policy> as Policy;

/** A runtime whose close is counted; nothing else of it is used here. */
function countedRuntime(): { runtime: Runtime; closes: () => number } {
  let closes = 0;
  const runtime = {
    close: () => {
      closes += 1;
      return Promise.resolve();
    },
  } as Partial<Runtime> as Runtime;
  return { runtime, closes: () => closes };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('a generation narrowed by deleted RotatedKeys', () => {
  it('holds the policy without the deleted keys, and the runtime and refresher it replaces', () => {
    const { runtime } = countedRuntime();
    const inForce = new Generation(policy, runtime, () => undefined);
    const narrowed = narrowedGeneration(
      inForce,
      policyWithout(policy, new Set(['key_billing'])),
      () => undefined,
    );
    expect(narrowed.policy.keys.map((key) => key.id)).toEqual(['key_search']);
    expect(narrowed.policy.file).toBe('objects');
    expect(narrowed.runtime.api).toBe(inForce.runtime.api);
    expect(narrowed.refresher).toBe(inForce.refresher);
    // The policy in force is not changed under its own runs.
    expect(policy.keys).toHaveLength(2);
  });

  it('closes the shared runtime once, after the last run of either generation', async () => {
    const { runtime, closes } = countedRuntime();
    const inForce = new Generation(policy, runtime, () => undefined);
    const runOnOld = inForce.use();
    const narrowed = narrowedGeneration(
      inForce,
      policyWithout(policy, new Set(['key_billing'])),
      () => undefined,
    );
    const runOnNarrowed = narrowed.use();

    // The next full build swaps in: the narrowed generation is retired.
    const retired = narrowed.retire();
    await settle();
    expect(closes()).toBe(0);
    runOnNarrowed();
    await settle();
    // A run started before the narrowing still stores through the runtime.
    expect(closes()).toBe(0);
    runOnOld();
    await retired;
    expect(closes()).toBe(1);
    await inForce.retire();
    expect(closes()).toBe(1);
  });
});
