// Replays of GitHub deliveries (issue 18, finding 1). X-Hub-Signature-256 covers the body only:
// X-GitHub-Delivery is not signed, so anyone holding one signed body (a repository admin's
// "Recent Deliveries" page, a proxy log) can send it again under fresh delivery ids. Such a
// replay must be the same delivery: no second fetch of the alert, no second alert to a person,
// nothing that fills the trigger's replay record. Pings and ignored events are recorded nowhere.
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { sign } from '@octokit/webhooks-methods';
import { Pool } from 'undici';
import { beforeEach, describe, expect, it } from 'vitest';
import { REPLAY_RECORD_FILES } from '../../../src/inbound/replay-records.ts';
import type { Daemon } from '../../../src/daemon/daemon.ts';
import { postTrigger, type DaemonBench } from '../../support/daemon-bench.ts';
import { secretScanningWebhook, type FakeGithub } from '../../support/fake-github.ts';
import {
  BILLING,
  deliver,
  GITHUB_WEBHOOK_SECRET,
  intakePolicy,
  startWithIntake,
  useGithubBench,
} from './support.ts';

const benches = useGithubBench();
let bench: DaemonBench;
let github: FakeGithub;

beforeEach(() => {
  bench = benches.bench();
  github = benches.github();
});

const webhook = (number: number): Record<string, unknown> =>
  secretScanningWebhook('created', { owner: 'octo-org', repo: 'billing-app', number });
/** GitHub's REST reads of alerts (the fake answers 404 for an alert it does not hold: a fetch failure, alerted). */
const fetches = (): number => github.requests.filter((request) => request.method === 'GET').length;
const intakeAlerts = (): number =>
  bench.alerter.alerts.filter(({ alert }) => alert.step === 'leak-intake').length;
const recordLines = async (): Promise<number> =>
  (await readFile(join(bench.stateDir, REPLAY_RECORD_FILES.github), 'utf8')).split('\n').filter(Boolean)
    .length;

describe('GitHub deliveries replayed under fresh delivery ids', () => {
  it('are one delivery: 202 once, then 409; the alert is fetched once and one alert goes out', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    const daemon = await startWithIntake(bench, github);
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++)
      statuses.push((await deliver(daemon, webhook(7), { delivery: randomUUID() })).status);
    await daemon.idle();
    expect(statuses).toEqual([202, 409, 409, 409, 409]);
    expect(fetches()).toBe(1);
    expect(intakeAlerts()).toBe(1);
    expect(bench.events('leak.intake.accepted')).toHaveLength(1);
  });

  it('a ping and an ignored event are recorded nowhere: the same delivery again is answered alike, audited once, and fetches nothing', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    const daemon = await startWithIntake(bench, github);
    const ping = { zen: 'Keep it logically awesome.', hook_id: 1 };
    const pingId = randomUUID();
    expect((await deliver(daemon, ping, { event: 'ping', delivery: pingId })).status).toBe(200);
    expect((await deliver(daemon, ping, { event: 'ping', delivery: pingId })).status).toBe(200);
    const resolved = secretScanningWebhook('resolved', { owner: 'octo-org', repo: 'billing-app', number: 3 });
    const resolvedId = randomUUID();
    expect(await deliver(daemon, resolved, { delivery: resolvedId })).toMatchObject({
      status: 202,
      json: { ignored: true },
    });
    expect(await deliver(daemon, resolved, { delivery: resolvedId })).toMatchObject({
      status: 202,
      json: { ignored: true },
    });
    await daemon.idle();
    expect(bench.events('leak.intake.ignored').map((event) => event.why)).toEqual(['action-not-handled']);
    expect(fetches()).toBe(0);
    // The header line only: nothing was claimed.
    expect(await recordLines()).toBe(1);
  });

  it('two different deliveries for one alert and action start one job: one fetch, the second audited as already handled', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    const daemon = await startWithIntake(bench, github);
    const first = webhook(8);
    const second = {
      ...first,
      sender: { ...(first.sender as Record<string, unknown>), login: 'someone-else' },
    };
    expect(await deliver(daemon, first)).toMatchObject({ status: 202, json: { accepted: true } });
    expect(await deliver(daemon, second)).toMatchObject({ status: 202, json: { ignored: true } });
    await daemon.idle();
    expect(fetches()).toBe(1);
    expect(intakeAlerts()).toBe(1);
    expect(bench.events('leak.intake.ignored')).toEqual([
      expect.objectContaining({
        alert: 'octo-org/billing-app#8',
        action: 'created',
        why: 'alert-already-handled',
      }),
    ]);
  });
});

interface Flood {
  statuses: Map<number, number>;
}

/** Sends `count` copies of one signed body, each under a fresh delivery id, 16 at a time; `onHalf` is sent halfway. */
async function flood(
  pool: Pool,
  body: string,
  event: string,
  count: number,
  onHalf: () => Promise<void>,
): Promise<Flood> {
  const signature = await sign(GITHUB_WEBHOOK_SECRET, body);
  const statuses = new Map<number, number>();
  let sent = 0;
  let halfway: Promise<void> | undefined;
  const worker = async (): Promise<void> => {
    while (sent < count) {
      sent += 1;
      if (sent === Math.floor(count / 2)) halfway = onHalf();
      const answer = await pool.request({
        path: '/v1/leaks/github',
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-github-event': event,
          'x-github-delivery': randomUUID(),
          'x-hub-signature-256': signature,
        },
        body,
      });
      await answer.body.dump();
      statuses.set(answer.statusCode, (statuses.get(answer.statusCode) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  await halfway;
  return { statuses };
}

describe('a flood of replayed GitHub deliveries', () => {
  it(
    '10,000 replays of one delivery and 10,000 of a ping cause one fetch and one alert, and a signed trigger sent meanwhile is answered 202',
    { timeout: 180_000 },
    async () => {
      await bench.writePolicyText(intakePolicy(bench, github));
      const daemon: Daemon = await startWithIntake(bench, github);
      await daemon.idle();
      const pool = new Pool(daemon.url, { connections: 16 });
      const triggers: number[] = [];
      const sendTrigger = async (): Promise<void> => {
        triggers.push(
          (
            await postTrigger(daemon, {
              body: JSON.stringify({ keys: [BILLING], reason: 'leak', ticket: 'INC-18' }),
            })
          ).status,
        );
      };
      try {
        const alerts = await flood(
          pool,
          JSON.stringify(webhook(7)),
          'secret_scanning_alert',
          10_000,
          sendTrigger,
        );
        const pings = await flood(
          pool,
          JSON.stringify({ zen: 'Anything added dilutes everything else.', hook_id: 7 }),
          'ping',
          10_000,
          sendTrigger,
        );
        await daemon.idle();
        expect(Object.fromEntries(alerts.statuses)).toEqual({ 202: 1, 409: 9_999 });
        expect(Object.fromEntries(pings.statuses)).toEqual({ 200: 10_000 });
      } finally {
        await pool.close();
      }
      expect(triggers).toEqual([202, 202]);
      expect(fetches()).toBe(1);
      expect(intakeAlerts()).toBe(1);
      // One claim written for 20,000 deliveries: the header and one line.
      expect(await recordLines()).toBe(2);
      // Refusals are audited within the budget, not one line each.
      expect(bench.events('trigger.rejected').length).toBeLessThanOrEqual(10);
    },
  );
});
