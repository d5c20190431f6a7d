// Issue 30: a leak never waits behind a routine run. A drift run over 50 keys reserves them all,
// but works through them one at a time; a leak for a key that run has not reached yet starts at
// once (it takes the reservation over), and the drift run skips that key when it gets there. A
// leak for a key whose work has started waits for it.
import { afterEach, describe, expect, it } from 'vitest';
import type { KeyPolicy } from '../../src/policy/schema.ts';
import type { KeyOutcome, RunTrigger } from '../../src/rotation/types.ts';
import { Generation } from '../../src/scheduler/generation.ts';
import { KeyLocks } from '../../src/scheduler/key-locks.ts';
import { Launcher } from '../../src/scheduler/launcher.ts';
import { keyPolicy, startBench, wrapBackend, type Bench } from '../rotation/harness.ts';

const BLOCKED = 'key_demo_billing';
const LEAKED = 'key_demo_search';
const SCHEDULED: RunTrigger = { reason: 'scheduled', force: false };
const LEAK: RunTrigger = { reason: 'leak', force: true, actor: 'github:octo/app#1' };

let bench: Bench | undefined;
afterEach(async () => {
  await bench?.close();
  bench = undefined;
});

/** 50 keys: the first one's state read blocks until `open`; the leaked key is the 41st. */
function fiftyKeys(org: (keyId: string) => string): KeyPolicy[] {
  const billingOrg = org(BLOCKED);
  return Array.from({ length: 50 }, (_, i) => {
    if (i === 0) return keyPolicy(BLOCKED, billingOrg, { driftCheckMs: 60_000 });
    if (i === 40) return keyPolicy(LEAKED, org(LEAKED), { driftCheckMs: 60_000 });
    return keyPolicy(`key_filler_${i}`, billingOrg, { driftCheckMs: 60_000 });
  });
}

/** A run of `source` over every key of the bench whose first key stops at `step` until `open`. */
async function startBlockedRun(b: Bench, source: 'drift' | 'schedule', step: 'readState' | 'acquireLock') {
  let open = (): void => undefined;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  let reached = (): void => undefined;
  const blocked = new Promise<void>((resolve) => {
    reached = resolve;
  });
  const runtime = await b.runtime({
    wrapBackend: (name, backend) =>
      name === 'files'
        ? wrapBackend(backend, {
            [step]: async (next: () => Promise<unknown>, target: { path: string }) => {
              if (target.path === `${BLOCKED}.json`) {
                reached();
                await gate;
              }
              return next();
            },
          })
        : backend,
  });
  const generation = new Generation(b.policy, runtime, () => undefined);
  const launcher = new Launcher({
    locks: new KeyLocks(),
    concurrency: 1,
    signal: new AbortController().signal,
    audit: b.audit,
    onKeyDone: () => undefined,
    track: (work) => work,
  });
  const drift = launcher.runFree(generation, b.policy.keys, SCHEDULED, source);
  await blocked;
  return { launcher, generation, drift, open };
}

describe('Launcher: a leak and a routine run over many keys', () => {
  it('a leak for a key the drift run has not reached starts at once, and the drift run skips it', async () => {
    bench = await startBench({ keys: fiftyKeys });
    const b = bench;
    const { launcher, generation, drift, open } = await startBlockedRun(b, 'drift', 'readState');
    const rollsBefore = b.emulator.state.apiKey(LEAKED).rollCount;
    let heard: KeyOutcome | undefined;
    // On main this waits for the whole drift run (blocked here on its first key): it never ends.
    await launcher.runAll(generation, [b.key(LEAKED)], LEAK, new Map([[LEAKED, 'rot-leak']]), {
      onKeyDone: (outcome) => {
        heard = outcome;
      },
    });
    expect(heard?.result).toBe('rotated');
    expect(b.emulator.state.apiKey(LEAKED).rollCount).toBe(rollsBefore + 1);
    open();
    await drift;
    const skipped = b
      .events()
      .filter(
        (event) => event.event === 'key.skipped' && event.keyId === LEAKED && event.why === 'in-flight',
      );
    expect(skipped).toHaveLength(1);
    // One roll: the drift run never probed or rolled the key the leak took over.
    expect(b.emulator.state.apiKey(LEAKED).rollCount).toBe(rollsBefore + 1);
  });

  it('a leak for a key whose drift work has started waits for it', async () => {
    bench = await startBench({ keys: fiftyKeys });
    const b = bench;
    const { launcher, generation, drift, open } = await startBlockedRun(b, 'drift', 'readState');
    let heard: KeyOutcome | undefined;
    const leak = launcher.runAll(generation, [b.key(BLOCKED)], LEAK, new Map([[BLOCKED, 'rot-leak']]), {
      onKeyDone: (outcome) => {
        heard = outcome;
      },
    });
    // Let every ready continuation run: the leak is still waiting behind the started probe.
    await new Promise((resolve) => setImmediate(resolve));
    expect(heard).toBeUndefined();
    open();
    await Promise.all([leak, drift]);
    expect(heard?.result).toBe('rotated');
  });

  it('a leak for a key whose schedule roll is under way waits for it, then costs no roll: its value died', async () => {
    bench = await startBench({ keys: (org) => [keyPolicy(BLOCKED, org(BLOCKED))] });
    const b = bench;
    // The key is due (never rotated): the schedule run holds it, stopped at its backend lock.
    const {
      launcher,
      generation,
      drift: schedule,
      open,
    } = await startBlockedRun(b, 'schedule', 'acquireLock');
    const rollsAtLeak = b.emulator.state.apiKey(BLOCKED).rollCount;
    let heard: KeyOutcome | undefined;
    const leak = launcher.runAll(generation, [b.key(BLOCKED)], LEAK, new Map([[BLOCKED, 'rot-leak']]), {
      // The intake's probe of the leaked value: alive while no roll happened since the report.
      stillNeeded: () => Promise.resolve(b.emulator.state.apiKey(BLOCKED).rollCount === rollsAtLeak),
      onKeyDone: (outcome) => {
        heard = outcome;
      },
    });
    open();
    await Promise.all([leak, schedule]);
    expect(heard).toMatchObject({ result: 'skipped', detail: 'already-dead', rotationId: 'rot-leak' });
    expect(b.emulator.state.apiKey(BLOCKED).rollCount).toBe(rollsAtLeak + 1);
  });
});
