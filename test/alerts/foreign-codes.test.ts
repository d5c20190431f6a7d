// An alert's errorCode is a catalogue code (issue 29 §3): a failure that carried a code from
// outside keyroll (a Node system error's ECONNRESET) is KR_UNEXPECTED in the typed field, with
// the foreign code kept beside it, and every sink shows the foreign code where it showed the code
// before, in payloads of the same shape (no foreignCode field reaches a receiver).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createAlerter } from '../../src/alerts/alerter.ts';
import { AlertSinkConfig } from '../../src/alerts/config.ts';
import type { PagerDutyEvent } from '../../src/alerts/pagerduty.ts';
import type { SlackMessage } from '../../src/alerts/slack.ts';
import type { Alert } from '../../src/alerts/types.ts';
import { createMemoryAuditLog, type MemoryAuditLog } from '../../src/audit/logger.ts';
import { typedCode } from '../../src/errors.ts';
import { startReceiver, type Receiver } from '../support/alert-receiver.ts';

const NOW = new Date('2026-03-01T12:00:00.000Z');

function reset(code: string): Error {
  return Object.assign(new Error('socket hang up'), { code });
}

function runAlert(error: unknown): Alert {
  return {
    severity: 'error',
    summary: 'keyroll daemon: a sweep run stopped unexpectedly: socket hang up',
    rotationId: 'run-1',
    step: 'run',
    ...typedCode(error),
    nextAction: 'the next sweep retries the keys that are still due',
  };
}

let receiver: Receiver;
let audit: MemoryAuditLog;

beforeEach(async () => {
  receiver = await startReceiver();
  audit = createMemoryAuditLog();
});
afterEach(async () => {
  await receiver.close();
});

function alerter(): ReturnType<typeof createAlerter> {
  return createAlerter({
    sinks: {
      siem: AlertSinkConfig.parse({ kind: 'webhook', url: `${receiver.url}/hooks/keyroll` }),
      slack: AlertSinkConfig.parse({ kind: 'slack', webhookUrl: 'env:SLACK_URL' }),
      pager: AlertSinkConfig.parse({
        kind: 'pagerduty',
        routingKey: 'env:PD_ROUTING_KEY',
        url: `${receiver.url}/v2/enqueue`,
      }),
    },
    audit,
    retry: { attempts: 1, initialBackoffMs: 1 },
    sleep: () => Promise.resolve(),
    now: () => NOW,
    env: {
      PD_ROUTING_KEY: 'R0UT1NGKEY0123456789abcdefabcdef',
      SLACK_URL: `${receiver.url}/services/T0/B0/x`,
    },
  });
}

function bodyAt(path: string): unknown {
  return receiver.requests.find((request) => request.path === path)?.body;
}

describe('alert error codes', () => {
  it('types a foreign code as KR_UNEXPECTED and keeps it beside; a catalogue code stands alone', () => {
    expect(typedCode(reset('ECONNRESET'))).toEqual({ errorCode: 'KR_UNEXPECTED', foreignCode: 'ECONNRESET' });
    expect(typedCode('KR_STORE_FAILED')).toEqual({ errorCode: 'KR_STORE_FAILED' });
    expect(typedCode(new Error('no code'))).toEqual({ errorCode: 'KR_UNEXPECTED' });
  });

  it('shows the foreign code to every sink, in payloads of the same shape as before', async () => {
    await alerter().send(runAlert(reset('ECONNRESET')));

    const webhook = bodyAt('/hooks/keyroll') as Record<string, unknown>;
    // The same keys, in the same order, as the Alert spread into the body always gave.
    expect(Object.keys(webhook)).toEqual([
      'severity',
      'summary',
      'rotationId',
      'step',
      'errorCode',
      'nextAction',
      'source',
      'event',
      'time',
    ]);
    expect(webhook.errorCode).toBe('ECONNRESET');

    const pager = bodyAt('/v2/enqueue') as PagerDutyEvent;
    expect(pager.dedup_key).toBe('keyroll:run:run-1:run:ECONNRESET');
    expect(pager.payload.class).toBe('ECONNRESET');
    expect(pager.payload.custom_details).toEqual({
      step: 'run',
      errorCode: 'ECONNRESET',
      nextAction: 'the next sweep retries the keys that are still due',
      rotationId: 'run-1',
    });

    const slack = bodyAt('/services/T0/B0/x') as SlackMessage;
    expect(JSON.stringify(slack.blocks)).toContain('*Error code*\\nECONNRESET');
    expect(JSON.stringify(slack)).not.toContain('foreignCode');

    for (const sent of audit.eventsNamed('alert.sent'))
      expect(sent).toMatchObject({ alertErrorCode: 'ECONNRESET' });
  });

  it('still tells two run-level failures with different foreign codes apart (deduplication)', async () => {
    const sender = alerter();
    await sender.send(runAlert(reset('ECONNRESET')), ['siem']);
    await sender.send(runAlert(reset('ETIMEDOUT')), ['siem']);
    await sender.send(runAlert(reset('ETIMEDOUT')), ['siem']);
    expect(receiver.requests.map((request) => (request.body as { errorCode: string }).errorCode)).toEqual([
      'ECONNRESET',
      'ETIMEDOUT',
    ]);
  });
});
