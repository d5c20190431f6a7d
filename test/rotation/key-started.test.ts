// Issue 29 §2: a run tells when a key's own work starts (RunOptions.onKeyStarted; the daemon's
// launcher counts the keys in flight with it): once per key that starts, before its onKeyDone, and
// never for a key skipped before starting (in-flight, native, the run stopped).
import { afterEach, describe, expect, it } from 'vitest';
import { runRotations } from '../../src/rotation/run.ts';
import { keyPolicy, startBench, wrapBackend, type Bench } from './harness.ts';

let bench: Bench | undefined;
afterEach(async () => {
  await bench?.close();
  bench = undefined;
});

const TAKEN = 'key_demo_billing';
const NATIVE = 'key_demo_search';
const STARTS = 'key_demo_ingest';

describe('RunOptions.onKeyStarted', () => {
  it('is told once per key that starts, before its outcome, and never for a key skipped before', async () => {
    bench = await startBench({
      keys: (org) => [
        keyPolicy(TAKEN, org(TAKEN)),
        keyPolicy(NATIVE, org(NATIVE), { scheduler: 'aws-native' }),
        keyPolicy(STARTS, org(STARTS)),
      ],
    });
    const runtime = await bench.runtime();
    const heard: string[] = [];
    const summary = await runRotations(runtime, {
      keys: bench.policy.keys,
      trigger: { reason: 'scheduled', force: false },
      concurrency: 1,
      mayStart: (key) => key.id !== TAKEN,
      onKeyStarted: (keyId) => heard.push(`started ${keyId}`),
      onKeyDone: (outcome) => heard.push(`done ${outcome.keyId}`),
    });
    await runtime.close();
    expect(summary.outcomes.map((outcome) => [outcome.keyId, outcome.result, outcome.detail])).toEqual([
      [TAKEN, 'skipped', 'in-flight'],
      [NATIVE, 'skipped', 'aws-native'],
      [STARTS, 'rotated', undefined],
    ]);
    expect(heard).toEqual([`done ${TAKEN}`, `done ${NATIVE}`, `started ${STARTS}`, `done ${STARTS}`]);
  });

  it('is never told for the keys of a run stopped before they start', async () => {
    bench = await startBench();
    const runtime = await bench.runtime();
    const stop = new AbortController();
    stop.abort();
    const started: string[] = [];
    const summary = await runRotations(runtime, {
      keys: bench.policy.keys,
      trigger: { reason: 'leak', force: true },
      signal: stop.signal,
      onKeyStarted: (keyId) => started.push(keyId),
    });
    await runtime.close();
    expect(summary.outcomes.every((outcome) => outcome.result === 'aborted')).toBe(true);
    expect(started).toEqual([]);
  });

  it('is told for a key whose state cannot be read: its work started, and onKeyDone ends it', async () => {
    bench = await startBench({ keys: (org) => [keyPolicy(STARTS, org(STARTS))] });
    const runtime = await bench.runtime({
      wrapBackend: (name, backend) =>
        name === 'files'
          ? wrapBackend(backend, { readState: () => Promise.reject(new Error('unreadable')) })
          : backend,
    });
    const heard: string[] = [];
    const summary = await runRotations(runtime, {
      keys: [bench.key(STARTS)],
      trigger: { reason: 'scheduled', force: false },
      onKeyStarted: (keyId) => heard.push(`started ${keyId}`),
      onKeyDone: (outcome) => heard.push(`done ${outcome.keyId}`),
    });
    await runtime.close();
    expect(summary.outcomes[0]).toMatchObject({ result: 'failed', step: 'preflight' });
    expect(heard).toEqual([`started ${STARTS}`, `done ${STARTS}`]);
  });
});
