import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AlertSinkConfig } from '../../src/alerts/config.ts';
import { createNotifier } from '../../src/alerts/notify.ts';
import type { SlackMessage } from '../../src/alerts/slack.ts';
import type { AlertResult, SuccessNotice } from '../../src/alerts/types.ts';
import { createMemoryAuditLog, type MemoryAuditLog } from '../../src/audit/logger.ts';
import { resetSanitizerForTests } from '../../src/audit/sanitize.ts';
import { Secret } from '../../src/audit/secret.ts';
import { startReceiver, type Receiver } from '../support/alert-receiver.ts';

const NOW = new Date('2026-03-01T12:00:00.000Z');
const notice: SuccessNotice = {
  keyId: 'key-1',
  organizationId: 'org-1',
  rotationId: 'rot-1',
  rotatedAt: '2026-03-01T11:59:59.000Z',
  destinations: [{ backend: 'vault', path: 'secret/app', version: '4' }],
  stage: 'finished',
};

let receiver: Receiver;
let audit: MemoryAuditLog;
let results: [string, AlertResult][];

beforeEach(async () => {
  receiver = await startReceiver();
  audit = createMemoryAuditLog();
  results = [];
});
afterEach(async () => {
  await receiver.close();
  resetSanitizerForTests();
});

function notifier(): ReturnType<typeof createNotifier> {
  return createNotifier({
    sinks: {
      hook: AlertSinkConfig.parse({ kind: 'webhook', url: `${receiver.url}/done` }),
      slack: AlertSinkConfig.parse({ kind: 'slack', webhookUrl: 'env:SLACK_URL' }),
      pager: AlertSinkConfig.parse({ kind: 'pagerduty', routingKey: 'env:PD_KEY', url: receiver.url }),
    },
    audit,
    retry: { attempts: 2, initialBackoffMs: 1 },
    sleep: () => Promise.resolve(),
    onResult: (sink, result) => results.push([sink, result]),
    now: () => NOW,
    env: { SLACK_URL: `${receiver.url}/slack`, PD_KEY: 'pd-routing-key-000000' },
  });
}

describe('notifySuccess', () => {
  it('posts key, destinations, versions and rotation id to a webhook, and audits notify.sent', async () => {
    await notifier().notifySuccess(notice, ['hook']);

    expect(receiver.requests[0]!.body).toEqual({
      ...notice,
      source: 'keyroll',
      event: 'rotation.succeeded',
      time: '2026-03-01T12:00:00.000Z',
    });
    expect(audit.eventsNamed('notify.sent')[0]).toMatchObject({
      sink: 'hook',
      attempts: 1,
      keyId: 'key-1',
      rotationId: 'rot-1',
      organizationId: 'org-1',
    });
    expect(results).toEqual([['hook', 'sent']]);
  });

  it('posts a Slack message naming the key and where it was stored', async () => {
    await notifier().notifySuccess(notice, ['slack']);

    const message = receiver.requests[0]!.body as SlackMessage;
    expect(receiver.requests[0]!.path).toBe('/slack');
    expect(message.text).toContain('key-1');
    expect(message.text).toContain('vault:secret/app (version 4)');
  });

  it('refuses to page PagerDuty for a success, auditing notify.failed', async () => {
    await notifier().notifySuccess(notice, ['pager']);

    expect(receiver.requests).toHaveLength(0);
    expect(audit.eventsNamed('notify.failed')[0]).toMatchObject({
      sink: 'pager',
      errorCode: 'KR_ALERT_SINK_UNSUPPORTED',
    });
  });

  it('audits notify.failed after retries, and resolves with the failure for the caller', async () => {
    receiver.answer(500, 500);

    await expect(notifier().notifySuccess(notice, ['hook'])).resolves.toEqual([
      {
        sink: 'hook',
        sent: false,
        errorCode: 'KR_ALERT_SINK_UNAVAILABLE',
        error: expect.any(String) as string,
      },
    ]);

    expect(receiver.requests).toHaveLength(2);
    expect(audit.eventsNamed('notify.failed')[0]).toMatchObject({
      level: 'warn',
      sink: 'hook',
      attempts: 2,
      errorCode: 'KR_ALERT_SINK_UNAVAILABLE',
      status: 500,
    });
    expect(results).toEqual([['hook', 'failed']]);
  });

  it('blanks a registered secret that found its way into the notice', async () => {
    const leaked = new Secret('sk_live_should_not_be_here_0003').reveal();

    await notifier().notifySuccess(
      { ...notice, destinations: [{ backend: 'file', path: `/tmp/${leaked}`, version: '1' }] },
      ['hook'],
    );

    expect(receiver.requests[0]!.raw).not.toContain(leaked);
  });

  it('writes to the audit log it is given with withAudit', async () => {
    const run = createMemoryAuditLog();

    await notifier()
      .withAudit(run.child({ runId: 'run-3' }))
      .notifySuccess(notice, ['hook']);

    expect(audit.events).toEqual([]);
    expect(run.eventsNamed('notify.sent')[0]).toMatchObject({ runId: 'run-3', keyId: 'key-1' });
  });
});
