// Issue 29 §2: the leak intake's rotation is one call, `Launcher.runOne`, that returns the outcome
// the key's run reported (the executor's, not one made up by the caller) and rejects with a typed
// error when there is none. The launcher hears a key start from the run's onKeyStarted.
import { afterEach, describe, expect, it } from 'vitest';
import type { ConsumerRefresher } from '../../src/consumers/refresher.ts';
import type { KeyOutcome, RunTrigger } from '../../src/rotation/types.ts';
import type { Runtime } from '../../src/rotation/runtime.ts';
import { Generation } from '../../src/scheduler/generation.ts';
import { KeyLocks } from '../../src/scheduler/key-locks.ts';
import { Launcher } from '../../src/scheduler/launcher.ts';
import { keyPolicy, startBench, wrapBackend, type Bench } from '../rotation/harness.ts';

const KEY = 'key_demo_billing';
const LEAK: RunTrigger = { reason: 'leak', force: true, actor: 'github:octo/app#1' };

let bench: Bench | undefined;
afterEach(async () => {
  await bench?.close();
  bench = undefined;
});

function launcherHearing(b: Bench, heard: KeyOutcome[], locks = new KeyLocks()): Launcher {
  return new Launcher({
    locks,
    concurrency: 1,
    signal: new AbortController().signal,
    audit: b.audit,
    onKeyDone: (outcome) => heard.push(outcome),
    track: (work) => work,
  });
}

describe('Launcher.runOne', () => {
  it("returns the outcome the key's run reported, with the rotation id it was given", async () => {
    bench = await startBench();
    const b = bench;
    const heard: KeyOutcome[] = [];
    const launcher = launcherHearing(b, heard);
    const generation = new Generation(b.policy, await b.runtime(), () => undefined);
    const rolls = b.emulator.state.apiKey(KEY).rollCount;
    const outcome = await launcher.runOne(generation, b.key(KEY), LEAK, 'rot-leak');
    // The very outcome the executor handed to onKeyDone: the launcher's own listener heard it too.
    expect(heard).toHaveLength(1);
    expect(outcome).toBe(heard[0]);
    expect(outcome).toMatchObject({ keyId: KEY, result: 'rotated', rotationId: 'rot-leak' });
    expect(b.emulator.state.apiKey(KEY).rollCount).toBe(rolls + 1);
  });

  it('a key whose value died while it waited is skipped as already-dead, and that outcome is returned', async () => {
    bench = await startBench();
    const b = bench;
    const locks = new KeyLocks();
    const launcher = launcherHearing(b, [], locks);
    const generation = new Generation(b.policy, await b.runtime(), () => undefined);
    // Another run holds the key: runOne waits for it, then asks stillNeeded.
    const release = locks.tryAcquire(KEY);
    expect(release).toBeDefined();
    const pending = launcher.runOne(generation, b.key(KEY), LEAK, 'rot-leak', {
      stillNeeded: () => Promise.resolve(false),
    });
    release?.();
    await expect(pending).resolves.toMatchObject({
      result: 'skipped',
      detail: 'already-dead',
      rotationId: 'rot-leak',
    });
  });

  it("a run that stops without the key's outcome rejects with KR_LAUNCHER_NO_OUTCOME, made up nothing", async () => {
    bench = await startBench();
    const b = bench;
    const heard: KeyOutcome[] = [];
    const launcher = launcherHearing(b, heard);
    const runtime = await b.runtime();
    // runRotations itself throws (a bug): the launcher reports the stopped run, no key outcome exists.
    const broken: Runtime = {
      ...runtime,
      rotationDeps: () => {
        throw new Error('rotation deps unavailable');
      },
    };
    const generation = new Generation(b.policy, broken, () => undefined);
    await expect(launcher.runOne(generation, b.key(KEY), LEAK, 'rot-leak')).rejects.toMatchObject({
      name: 'LauncherError',
      code: 'KR_LAUNCHER_NO_OUTCOME',
      keyId: KEY,
    });
    expect(heard).toHaveLength(0);
    expect(b.events().filter((event) => event.event === 'run.aborted')).toHaveLength(1);
  });

  it("a consumer refresher that throws at a run's start is a stopped run: reported, and the key is free again", async () => {
    bench = await startBench();
    const b = bench;
    const locks = new KeyLocks();
    const launcher = launcherHearing(b, [], locks);
    const broken = {
      begin: () => {
        throw new Error('refresher unusable');
      },
    } as unknown as ConsumerRefresher;
    const generation = new Generation(b.policy, await b.runtime(), () => undefined, broken);
    await expect(launcher.runOne(generation, b.key(KEY), LEAK, 'rot-leak')).rejects.toMatchObject({
      code: 'KR_LAUNCHER_NO_OUTCOME',
    });
    expect(b.events().filter((event) => event.event === 'run.aborted')).toHaveLength(1);
    // The key's hold and the generation's use were given back: the next run of the key can start.
    const release = locks.tryAcquire(KEY);
    expect(release).toBeDefined();
    release?.();
  });

  it('a launcher that throws rejects with KR_LAUNCHER_FAILED, and leaves the key free', async () => {
    bench = await startBench();
    const b = bench;
    const locks = new KeyLocks();
    const launcher = launcherHearing(b, [], locks);
    // Usable for the whole call, unusable for the held run inside it: the key was held by then.
    class Unusable extends Generation {
      #uses = 0;
      override use(): () => void {
        this.#uses += 1;
        if (this.#uses > 1) throw new Error('generation unusable');
        return super.use();
      }
    }
    const generation = new Unusable(b.policy, await b.runtime(), () => undefined);
    await expect(launcher.runOne(generation, b.key(KEY), LEAK, 'rot-leak')).rejects.toMatchObject({
      name: 'LauncherError',
      code: 'KR_LAUNCHER_FAILED',
      keyId: KEY,
    });
    expect(locks.tryAcquire(KEY)).toBeDefined();
  });
});

describe('Launcher.inFlight', () => {
  it('names the keys whose own work started (onKeyStarted), not the ones still queued, until each is done', async () => {
    const queued = 'key_demo_search';
    bench = await startBench({
      keys: (org) => [keyPolicy(KEY, org(KEY)), keyPolicy(queued, org(queued))],
    });
    const b = bench;
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
              readState: async (next, target) => {
                if (target.path === `${KEY}.json`) {
                  reached();
                  await gate;
                }
                return next();
              },
            })
          : backend,
    });
    const launcher = launcherHearing(b, []);
    const generation = new Generation(b.policy, runtime, () => undefined);
    const run = launcher.runFree(
      generation,
      b.policy.keys,
      { reason: 'scheduled', force: false },
      'schedule',
    );
    await blocked;
    expect(launcher.inFlight()).toEqual([KEY]);
    open();
    await run;
    expect(launcher.inFlight()).toEqual([]);
  });
});
