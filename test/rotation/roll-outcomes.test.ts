// The roll-outcome table of docs/design.md, one case per row, against the emulator over loopback.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startBench, type Bench } from './harness.ts';

let bench: Bench;
beforeEach(async () => {
  bench = await startBench();
});
afterEach(async () => {
  await bench.close();
});

const KEY = 'key_demo_billing';

async function storedSecret(keyId: string): Promise<string> {
  const text = await readFile(join(bench.dir, 'secrets', `${keyId}.json`), 'utf8');
  return (JSON.parse(text) as { apiKey: string }).apiKey;
}

function eventsNamed(name: string): Record<string, unknown>[] {
  return bench.events().filter((e) => e.event === name);
}

describe('roll outcomes (docs/design.md table)', () => {
  it('200: the secret is stored at once and is the live secret', async () => {
    const summary = await bench.run({ keys: [KEY] });
    expect(summary.rotated).toBe(1);
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    expect(bench.emulator.state.isLiveSecret(KEY, await storedSecret(KEY))).toBe(true);
  });

  for (const [status, code] of [
    [400, 'KR_API_BAD_REQUEST'],
    [402, 'KR_API_PLAN_REQUIRED'],
    [403, 'KR_API_FORBIDDEN'],
    [404, 'KR_API_NOT_FOUND'],
  ] as const) {
    it(`${status}: the key fails with ${code}, one alert, no retry, intent cleared`, async () => {
      bench.emulator.faults.inject('roll', { kind: 'status', status }, 1);
      const summary = await bench.run({ keys: [KEY] });
      expect(summary.failed).toBe(1);
      expect(summary.exitCode).toBe(1);
      expect(summary.outcomes[0]).toMatchObject({
        result: 'failed',
        step: 'roll',
        errorCode: code,
        rolls: 1,
      });
      expect(bench.emulator.state.rollCount(KEY)).toBe(0);
      expect(bench.alerter.alerts).toHaveLength(1);
      expect(bench.alerter.alerts[0]?.alert).toMatchObject({ keyId: KEY, step: 'roll', errorCode: code });
      expect(eventsNamed('key.intent.cleared')).toHaveLength(1);
    });
  }

  it('403 explains that API keys can never roll keys', async () => {
    bench.emulator.faults.inject('roll', { kind: 'status', status: 403 }, 1);
    await bench.run({ keys: [KEY] });
    expect(bench.alerter.alerts[0]?.alert.summary).toMatch(/API key can never roll/);
  });

  it('401: the whole run stops before more rolls, alerts once, exit 3', async () => {
    bench.emulator.faults.inject('roll', { kind: 'status', status: 401 }, 1);
    const summary = await bench.run({ concurrency: 1 });
    expect(summary.exitCode).toBe(3);
    expect(summary.aborted?.reason).toBe('credential-refused');
    expect(bench.emulator.state.totalRolls()).toBe(0);
    expect(summary.outcomes.map((o) => o.result)).toEqual(['aborted', 'aborted', 'aborted']);
    expect(bench.alerter.alerts).toHaveLength(1);
    expect(bench.alerter.alerts[0]?.alert.errorCode).toBe('KR_RUN_CREDENTIAL_REFUSED');
  });

  it('429: waits Retry-After, then rolls once', async () => {
    const waits: number[] = [];
    bench.emulator.faults.inject('roll', { kind: 'status', status: 429, retryAfter: '7' }, 2);
    const summary = await bench.run({
      keys: [KEY],
      runtime: {
        sleep: (ms) => {
          waits.push(ms);
          return Promise.resolve();
        },
      },
    });
    expect(summary.rotated).toBe(1);
    expect(waits.slice(0, 2)).toEqual([7000, 7000]);
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    expect(bench.alerter.alerts).toHaveLength(0);
  });

  it('500 before applying: the probe says not rolled, roll again, one roll applied', async () => {
    await bench.run({ keys: [KEY] }); // a stored secret to probe with
    const runtimeNow = new Date(Date.now() + 40 * 24 * 3600_000);
    bench.emulator.faults.inject('roll', { kind: 'status', status: 500 }, 1);
    const summary = await bench.run({ keys: [KEY], runtime: { now: () => runtimeNow } });
    expect(summary.rotated).toBe(1);
    expect(bench.emulator.state.rollCount(KEY)).toBe(2);
    expect(eventsNamed('key.probe').at(-1)).toMatchObject({ verdict: 'not-rolled' });
    expect(bench.emulator.state.isLiveSecret(KEY, await storedSecret(KEY))).toBe(true);
  });

  for (const then of ['status500', 'drop', 'hang'] as const) {
    it(`applied then lost (${then}): the probe says rolled-and-lost, roll again, the stored secret is live`, async () => {
      await bench.run({ keys: [KEY] });
      const later = new Date(Date.now() + 40 * 24 * 3600_000);
      bench.emulator.faults.inject('roll', { kind: 'failAfterApply', then }, 1);
      const summary = await bench.run({ keys: [KEY], runtime: { now: () => later } });
      expect(summary.rotated).toBe(1);
      expect(bench.emulator.state.rollCount(KEY)).toBe(3);
      expect(eventsNamed('key.probe').at(-1)).toMatchObject({ verdict: 'rolled-and-lost' });
      expect(bench.emulator.state.isLiveSecret(KEY, await storedSecret(KEY))).toBe(true);
    });
  }

  it('an answer that breaks the spec but carries data.key is stored first and reported after', async () => {
    bench.emulator.faults.inject(
      'roll',
      { kind: 'malformed', status: 200, body: '{"success":"yes","data":{"key":"{{key}}"}}' },
      1,
    );
    const summary = await bench.run({ keys: [KEY] });
    expect(summary.outcomes[0]?.detail).toBe('malformed-roll-answer');
    expect(bench.emulator.state.isLiveSecret(KEY, await storedSecret(KEY))).toBe(true);
    expect(eventsNamed('key.rolled')[0]).toHaveProperty('malformedAnswer');
  });

  it("a key the provider already revoked still rotates: the roll uses keyroll's credential", async () => {
    bench.emulator.state.revokeKey(KEY);
    const summary = await bench.run({ keys: [KEY], trigger: { reason: 'leak', force: true } });
    expect(summary.rotated).toBe(1);
    expect(bench.emulator.state.isLiveSecret(KEY, await storedSecret(KEY))).toBe(true);
  });
});
