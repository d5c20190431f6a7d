import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createAlerter } from '../../src/alerts/alerter.ts';
import { AlertSinkConfig } from '../../src/alerts/config.ts';
import { pagerDutyDedupKey, type PagerDutyEvent } from '../../src/alerts/pagerduty.ts';
import { escapeSlackText, type SlackMessage } from '../../src/alerts/slack.ts';
import type { Alert } from '../../src/alerts/types.ts';
import { createMemoryAuditLog, type MemoryAuditLog } from '../../src/audit/logger.ts';
import { resetSanitizerForTests } from '../../src/audit/sanitize.ts';
import { Secret } from '../../src/audit/secret.ts';
import { startReceiver, type Receiver } from '../support/alert-receiver.ts';

const NOW = new Date('2026-03-01T12:00:00.000Z');
const SLACK_PATH = '/services/T0000/B0000/slackWebhookToken0001';
const ROUTING_KEY = 'R0UT1NGKEY0123456789abcdefabcdef';

const alert: Alert = {
  severity: 'error',
  summary: 'keyroll could not rotate key key-1 (org-1) at step verify: read-back digest <mismatch> & retry',
  keyId: 'key-1',
  organizationId: 'org-1',
  rotationId: 'rot-1',
  step: 'verify',
  errorCode: 'KR_VERIFY_FAILED',
  nextAction: 'the new secret is stored; check the destination and the API; the next run re-checks',
  details: { backend: 'vault', path: 'secret/app' },
};

let receiver: Receiver;
let audit: MemoryAuditLog;

beforeEach(async () => {
  receiver = await startReceiver();
  audit = createMemoryAuditLog();
});
afterEach(async () => {
  await receiver.close();
  resetSanitizerForTests();
});

function alerter(): ReturnType<typeof createAlerter> {
  return createAlerter({
    sinks: {
      slack: AlertSinkConfig.parse({ kind: 'slack', webhookUrl: 'env:SLACK_URL' }),
      pager: AlertSinkConfig.parse({
        kind: 'pagerduty',
        routingKey: 'file:/dev/null',
        url: `${receiver.url}/v2/enqueue`,
      }),
      pagerEnv: AlertSinkConfig.parse({
        kind: 'pagerduty',
        routingKey: 'env:PD_ROUTING_KEY',
        url: `${receiver.url}/v2/enqueue`,
      }),
    },
    audit,
    retry: { attempts: 2, initialBackoffMs: 1 },
    sleep: () => Promise.resolve(),
    now: () => NOW,
    env: { SLACK_URL: `${receiver.url}${SLACK_PATH}`, PD_ROUTING_KEY: ROUTING_KEY },
  });
}

describe('Slack sink', () => {
  it('posts { text, blocks } naming severity, key, step, error code and next action', async () => {
    await alerter().send(alert, ['slack']);

    const [request] = receiver.requests;
    expect(request!.path).toBe(SLACK_PATH);
    const message = request!.body as SlackMessage;
    expect(message.text).toContain('ERROR');
    expect(message.text).toContain('key-1');
    const rendered = JSON.stringify(message.blocks);
    for (const fact of [
      '*Severity*\\nerror',
      '*Key*\\nkey-1',
      '*Organization*\\norg-1',
      '*Step*\\nverify',
      '*Error code*\\nKR_VERIFY_FAILED',
      '*Rotation*\\nrot-1',
      '*Next action*\\nthe new secret is stored',
    ]) {
      expect(rendered).toContain(fact);
    }
    expect(message.blocks[0]).toEqual({
      type: 'header',
      text: { type: 'plain_text', text: 'ERROR keyroll: key key-1 failed at verify' },
    });
  });

  it("escapes Slack's control characters in the summary", async () => {
    await alerter().send(alert, ['slack']);

    const message = receiver.requests[0]!.body as SlackMessage;
    expect(JSON.stringify(message)).toContain('digest &lt;mismatch&gt; &amp; retry');
    expect(escapeSlackText('<!channel> & <@U1>')).toBe('&lt;!channel&gt; &amp; &lt;@U1&gt;');
  });

  it('keeps the webhook URL, which embeds a token, out of every audit line', async () => {
    receiver.answer({ status: 404, body: 'no_service' });

    await alerter().send(alert, ['slack']);

    expect(audit.eventsNamed('alert.undeliverable')[0]).toMatchObject({
      sink: 'slack',
      errorCode: 'KR_ALERT_REJECTED',
      responseExcerpt: 'no_service',
    });
    expect(audit.lines.join('')).not.toContain('slackWebhookToken0001');
  });

  it('clips a long summary to what a Slack section accepts', async () => {
    await alerter().send({ ...alert, summary: 'x'.repeat(5000) }, ['slack']);

    const message = receiver.requests[0]!.body as SlackMessage;
    const section = message.blocks[1] as { text: { text: string } };
    expect(section.text.text.length).toBe(3000);
  });
});

describe('PagerDuty sink', () => {
  it('posts an Events API v2 trigger with dedup key, component, group and class', async () => {
    await alerter().send(alert, ['pagerEnv']);

    const [request] = receiver.requests;
    expect(request!.path).toBe('/v2/enqueue');
    expect(request!.body).toEqual({
      routing_key: ROUTING_KEY,
      event_action: 'trigger',
      dedup_key: 'keyroll:key-1:rot-1',
      client: 'keyroll',
      payload: {
        summary: alert.summary,
        source: 'keyroll',
        severity: 'error',
        timestamp: '2026-03-01T12:00:00.000Z',
        component: 'key-1',
        group: 'org-1',
        class: 'KR_VERIFY_FAILED',
        custom_details: {
          step: 'verify',
          errorCode: 'KR_VERIFY_FAILED',
          nextAction: alert.nextAction,
          keyId: 'key-1',
          organizationId: 'org-1',
          rotationId: 'rot-1',
          backend: 'vault',
          path: 'secret/app',
        },
      },
    } satisfies PagerDutyEvent);
  });

  it('sends the routing key even though the sanitizer knows it as a secret', async () => {
    new Secret(ROUTING_KEY);

    await alerter().send(alert, ['pagerEnv']);

    expect((receiver.requests[0]!.body as PagerDutyEvent).routing_key).toBe(ROUTING_KEY);
  });

  it('keeps the routing key out of every audit line, sent or not', async () => {
    receiver.answer({
      status: 400,
      body: `{"status":"invalid event","errors":["routing_key ${ROUTING_KEY} unknown"]}`,
    });

    await alerter().send(alert, ['pagerEnv']);

    expect(audit.eventsNamed('alert.undeliverable')[0]).toMatchObject({
      errorCode: 'KR_ALERT_REJECTED',
      status: 400,
    });
    expect(audit.lines.join('')).not.toContain(ROUTING_KEY);
  });

  it('treats 202 Accepted as delivered', async () => {
    receiver.answer({ status: 202, body: '{"status":"success","dedup_key":"keyroll:key-1:rot-1"}' });

    await alerter().send(alert, ['pagerEnv']);

    expect(audit.eventsNamed('alert.sent')[0]).toMatchObject({
      sink: 'pagerEnv',
      sinkKind: 'pagerduty',
      status: 202,
    });
  });

  it('audits an empty routing-key file as an unresolved reference', async () => {
    await alerter().send(alert, ['pager']);

    expect(receiver.requests).toHaveLength(0);
    expect(audit.eventsNamed('alert.undeliverable')[0]).toMatchObject({
      sink: 'pager',
      errorCode: 'KR_REF_UNRESOLVED',
    });
  });

  it('gives run-level alerts a dedup key per run, step and error code', () => {
    expect(
      pagerDutyDedupKey({
        ...alert,
        keyId: undefined,
        rotationId: 'run-1',
        step: 'run',
        errorCode: 'KR_RUN_SHUTDOWN',
      }),
    ).toBe('keyroll:run:run-1:run:KR_RUN_SHUTDOWN');
  });

  it('opens an incident of its own for each alert without a rotation id: a second leak of the same key pages again (issue 18)', async () => {
    const leak = (source: string): Alert => ({
      ...alert,
      rotationId: undefined,
      severity: 'critical',
      step: 'leak-intake',
      errorCode: 'KR_LEAK_ALERT_ONLY',
      details: { source },
    });
    await alerter().send(leak('github'), ['pagerEnv']);
    await alerter().send(leak('gitguardian'), ['pagerEnv']);
    const keys = receiver.requests.map((request) => (request.body as PagerDutyEvent).dedup_key);
    expect(keys).toHaveLength(2);
    expect(keys[0]).toMatch(/^keyroll:key-1:alert-[0-9a-f-]{36}$/);
    expect(keys[1]).not.toBe(keys[0]);
    const runLevel = { ...alert, keyId: undefined, rotationId: undefined };
    expect(pagerDutyDedupKey(runLevel)).not.toBe(pagerDutyDedupKey(runLevel));
  });

  it('keeps the dedup key of one alert across the retries of its delivery', async () => {
    receiver.answer({ status: 500, body: 'try again' }, { status: 202, body: '{"status":"success"}' });
    await alerter().send({ ...alert, rotationId: undefined }, ['pagerEnv']);
    const keys = receiver.requests.map((request) => (request.body as PagerDutyEvent).dedup_key);
    expect(keys).toHaveLength(2);
    expect(keys[1]).toBe(keys[0]);
  });
});
