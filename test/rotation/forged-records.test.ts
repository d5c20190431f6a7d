// Issue 18 §3 on the file backend: someone who may change keyroll's bookkeeping but not the secret
// (on AWS: TagResource; on Vault: the metadata path; here: the sidecar) forges the failure record
// of a key 90 days overdue. Before, `quarantinedAt: "x"` skipped it as quarantined with 0 alerts, and
// a last alert in the future meant no reminder ever. Now the key is rotated, or alerted, and the
// record is audited as distrusted. Vault and AWS: test/integration/forged-records.test.ts.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { FailureSettings } from '../../src/policy/schema.ts';
import { keyPolicy, startBench, wrapBackend, type Bench } from './harness.ts';

const KEY = 'key_demo_billing';
const HOUR = 3600_000;
const DAY = 24 * HOUR;
const FAILURES: FailureSettings = {
  backoffInitialMs: HOUR,
  backoffCapMs: DAY,
  jitter: 0,
  quarantineAfter: 5,
  remindEveryMs: DAY,
};

let bench: Bench;
afterEach(async () => {
  await bench.close();
});

const ago = (ms: number): string => new Date(Date.now() - ms).toISOString();
const events = (name: string) => bench.events().filter((e) => e.event === name);

/** A key rotated once, whose sidecar then says it was last rotated 90 days ago (maxAge 30 days). */
async function overdueKey(): Promise<string> {
  bench = await startBench({ keys: (org) => [keyPolicy(KEY, org(KEY), { failures: FAILURES })] });
  expect((await bench.run()).rotated).toBe(1);
  const sidecar = join(bench.dir, 'secrets', `${KEY}.json.keyroll.json`);
  await edit(sidecar, { lastRotatedAt: ago(90 * DAY) });
  return sidecar;
}

async function edit(sidecar: string, fields: Record<string, unknown>): Promise<void> {
  const current = JSON.parse(await readFile(sidecar, 'utf8')) as Record<string, unknown>;
  await writeFile(sidecar, JSON.stringify({ ...current, ...fields }));
}

const forged = (fields: Record<string, unknown>) => ({
  rotationId: 'forged',
  step: 'preflight',
  errorCode: 'KR_BACKEND_DENIED',
  at: ago(DAY),
  consecutive: 7,
  firstAt: ago(10 * DAY),
  ...fields,
});

describe('a forged failure record on a key 90 days overdue (file backend)', () => {
  it('quarantinedAt "x" and lastAlertedAt "x": the key is rotated, not skipped as quarantined', async () => {
    const sidecar = await overdueKey();
    await edit(sidecar, { lastFailure: forged({ quarantinedAt: 'x', lastAlertedAt: 'x' }) });
    const summary = await bench.run();
    expect(summary.outcomes[0]).toMatchObject({ result: 'rotated' });
    expect(events('key.record.distrusted').map((e) => [e.record, e.field, e.problem, e.action])).toEqual([
      ['lastFailure', 'quarantinedAt', 'malformed', 'ignored'],
      ['lastFailure', 'lastAlertedAt', 'malformed', 'ignored'],
    ]);
    expect(events('key.record.distrusted')[0]).toMatchObject({ keyId: KEY, level: 'warn' });
  });

  it('a valid quarantine whose last alert lies in the future: the reminder goes out now', async () => {
    const sidecar = await overdueKey();
    await edit(sidecar, {
      lastFailure: forged({ quarantinedAt: ago(DAY), lastAlertedAt: '2099-01-01T00:00:00.000Z' }),
    });
    const summary = await bench.run();
    expect(summary.outcomes[0]).toMatchObject({ result: 'skipped', detail: 'quarantined' });
    expect(bench.alerter.alerts.map((a) => [a.alert.errorCode, a.alert.step])).toEqual([
      ['KR_KEY_QUARANTINED', 'quarantine'],
    ]);
    expect(bench.alerter.alerts[0]?.alert.summary).toMatch(
      /still QUARANTINED: 7 consecutive failures since .*; quarantined since /,
    );
    expect(events('key.record.distrusted')[0]).toMatchObject({
      field: 'lastAlertedAt',
      problem: 'future',
      value: '2099-01-01T00:00:00.000Z',
    });
    // The reminder rewrote the record with a true time: the next run within remindEvery is quiet.
    await bench.run();
    expect(bench.alerter.alerts).toHaveLength(1);
  });

  it('a backoff until 2099 is held to the policy cap: the key is attempted once the cap has passed', async () => {
    const sidecar = await overdueKey();
    await edit(sidecar, {
      lastFailure: forged({ at: ago(2 * DAY), consecutive: 1, nextAttemptAt: '2099-01-01T00:00:00.000Z' }),
    });
    expect((await bench.run()).outcomes[0]).toMatchObject({ result: 'rotated' });
    expect(events('key.record.distrusted')[0]).toMatchObject({
      field: 'nextAttemptAt',
      problem: 'beyond-policy',
      action: 'bounded',
    });
  });

  it('a last rotation dated in the future does not make the key look fresh', async () => {
    const sidecar = await overdueKey();
    await edit(sidecar, { lastRotatedAt: '2099-01-01T00:00:00.000Z' });
    expect((await bench.run()).outcomes[0]).toMatchObject({ result: 'rotated' });
    expect(events('key.record.distrusted')[0]).toMatchObject({ record: 'lastRotatedAt', problem: 'future' });
  });

  it('an intent marker the backend could not decode at all: the stored secret is probed at once, as recovery would', async () => {
    await overdueKey();
    await bench.run({ trigger: { reason: 'manual', force: true } });
    const summary = await bench.run({
      runtime: {
        wrapBackend: (name, b) =>
          name === 'files'
            ? wrapBackend(b, {
                readState: async (next) => ({
                  ...(await next()),
                  doubts: [{ record: 'intent', problem: 'malformed', action: 'ignored' }],
                }),
              })
            : b,
      },
    });
    expect(summary.outcomes[0]).toMatchObject({ result: 'skipped', detail: 'not-due' });
    expect(events('key.probe').at(-1)).toMatchObject({ step: 'drift', verdict: 'stored-secret-works' });
    expect(events('key.record.distrusted').at(-1)).toMatchObject({ record: 'intent', action: 'ignored' });
  });
});
