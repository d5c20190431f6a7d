import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AlertSinkConfig } from '../../src/alerts/config.ts';
import { createAlerter, type AlerterOptions } from '../../src/alerts/alerter.ts';
import type { Alert, AlertResult } from '../../src/alerts/types.ts';
import { createMemoryAuditLog, type MemoryAuditLog } from '../../src/audit/logger.ts';
import { resetSanitizerForTests } from '../../src/audit/sanitize.ts';
import { Secret } from '../../src/audit/secret.ts';
import { refusedUrl, startReceiver, type Receiver } from '../support/alert-receiver.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';

const NOW = new Date('2026-03-01T12:00:00.000Z');

const alert: Alert = {
  severity: 'critical',
  summary: 'keyroll could not rotate key key-1 (org-1) at step store: vault answered 503',
  keyId: 'key-1',
  organizationId: 'org-1',
  rotationId: 'rot-1',
  step: 'store',
  errorCode: 'KR_BACKEND_UNAVAILABLE',
  nextAction:
    'the key is unusable: the old secret is dead and the new one was not stored; the next run re-rolls it',
};

let receiver: Receiver;
let audit: MemoryAuditLog;
let waits: number[];
let results: [string, AlertResult][];

beforeEach(async () => {
  receiver = await startReceiver();
  audit = createMemoryAuditLog();
  waits = [];
  results = [];
});
afterEach(async () => {
  await receiver.close();
  resetSanitizerForTests();
});

function alerterFor(
  sinks: Record<string, unknown>,
  extra: Partial<AlerterOptions> = {},
): ReturnType<typeof createAlerter> {
  return createAlerter({
    sinks: Object.fromEntries(
      Object.entries(sinks).map(([name, config]) => [name, AlertSinkConfig.parse(config)]),
    ),
    audit,
    retry: { attempts: 3, initialBackoffMs: 100 },
    sleep: (ms) => {
      waits.push(ms);
      return Promise.resolve();
    },
    onResult: (sink, result) => results.push([sink, result]),
    now: () => NOW,
    env: {},
    ...extra,
  });
}

function webhook(): Record<string, unknown> {
  return { siem: { kind: 'webhook', url: `${receiver.url}/hooks/keyroll` } };
}

describe('alerter: generic webhook', () => {
  it('posts the alert as JSON with source, event and time', async () => {
    await alerterFor(webhook()).send(alert);

    expect(receiver.requests).toHaveLength(1);
    const [request] = receiver.requests;
    expect(request).toMatchObject({ method: 'POST', path: '/hooks/keyroll' });
    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.body).toEqual({
      ...alert,
      source: 'keyroll',
      event: 'rotation.failed',
      time: '2026-03-01T12:00:00.000Z',
    });
  });

  it('resolves header references at send time and sends their values', async () => {
    const env: NodeJS.ProcessEnv = { SIEM_TOKEN: 'Bearer first-token-value' };
    const alerter = alerterFor(
      { siem: { kind: 'webhook', url: receiver.url, headers: { Authorization: 'env:SIEM_TOKEN' } } },
      { env },
    );

    await alerter.send(alert);
    env.SIEM_TOKEN = 'Bearer rotated-token-value';
    await alerter.send({ ...alert, rotationId: 'rot-2' });

    expect(receiver.requests.map((r) => r.headers.authorization)).toEqual([
      'Bearer first-token-value',
      'Bearer rotated-token-value',
    ]);
  });

  it('reads the URL from a reference and keeps it out of the audit trail', async () => {
    const alerter = alerterFor(
      { siem: { kind: 'webhook', urlRef: 'env:SIEM_URL' } },
      { env: { SIEM_URL: `${receiver.url}/t/0123456789abcdef` } },
    );

    await alerter.send(alert);

    expect(receiver.requests[0]!.path).toBe('/t/0123456789abcdef');
    expect(audit.eventsNamed('alert.sent')[0]).not.toHaveProperty('url');
    expect(audit.lines.join('')).not.toContain('0123456789abcdef');
  });

  it('audits alert.sent with the sink, attempts, status and the alert it carried', async () => {
    await alerterFor(webhook()).send(alert);

    expect(audit.eventsNamed('alert.sent')).toEqual([
      expect.objectContaining({
        sink: 'siem',
        sinkKind: 'webhook',
        attempts: 1,
        status: 200,
        url: `${receiver.url}/hooks/keyroll`,
        severity: 'critical',
        alertStep: 'store',
        alertErrorCode: 'KR_BACKEND_UNAVAILABLE',
        rotationId: 'rot-1',
        keyId: 'key-1',
        organizationId: 'org-1',
      }),
    ]);
  });
});

describe('alerter: retries', () => {
  it('retries 5xx with exponential backoff until the sink accepts', async () => {
    receiver.answer(503, 502, 200);

    await alerterFor(webhook()).send(alert);

    expect(receiver.requests).toHaveLength(3);
    expect(waits).toEqual([100, 200]);
    expect(audit.eventsNamed('alert.sent')[0]).toMatchObject({ attempts: 3 });
    expect(results).toEqual([['siem', 'sent']]);
  });

  it('honours Retry-After in seconds on 429', async () => {
    receiver.answer({ status: 429, headers: { 'retry-after': '7' } }, 200);

    await alerterFor(webhook()).send(alert);

    expect(waits).toEqual([7000]);
    expect(receiver.requests).toHaveLength(2);
  });

  it('honours Retry-After as an HTTP date, read against the injected clock', async () => {
    receiver.answer(
      { status: 503, headers: { 'retry-after': new Date(NOW.getTime() + 4000).toUTCString() } },
      200,
    );

    await alerterFor(webhook()).send(alert);

    expect(waits).toEqual([4000]);
  });

  it('caps a Retry-After longer than the maximum backoff', async () => {
    receiver.answer({ status: 429, headers: { 'retry-after': '3600' } }, 200);

    await alerterFor(webhook(), { retry: { attempts: 2, initialBackoffMs: 100, maxBackoffMs: 5000 } }).send(
      alert,
    );

    expect(waits).toEqual([5000]);
  });

  it('audits alert.undeliverable after the last attempt, and send still resolves', async () => {
    receiver.answer(503, 503, 503);

    await expect(alerterFor(webhook()).send(alert)).resolves.toBeUndefined();

    expect(receiver.requests).toHaveLength(3);
    expect(audit.eventsNamed('alert.sent')).toEqual([]);
    expect(audit.eventsNamed('alert.undeliverable')).toEqual([
      expect.objectContaining({
        level: 'error',
        sink: 'siem',
        attempts: 3,
        errorCode: 'KR_ALERT_SINK_UNAVAILABLE',
        status: 503,
        alertErrorCode: 'KR_BACKEND_UNAVAILABLE',
        keyId: 'key-1',
        rotationId: 'rot-1',
      }),
    ]);
    expect(results).toEqual([['siem', 'failed']]);
  });

  it('does not retry a 4xx other than 429, and keeps what the sink said', async () => {
    receiver.answer({ status: 400, body: 'invalid_payload' });

    await alerterFor(webhook()).send(alert);

    expect(receiver.requests).toHaveLength(1);
    expect(waits).toEqual([]);
    expect(audit.eventsNamed('alert.undeliverable')[0]).toMatchObject({
      attempts: 1,
      errorCode: 'KR_ALERT_REJECTED',
      status: 400,
      responseExcerpt: 'invalid_payload',
    });
  });

  it('retries a connection the sink hung up on', async () => {
    receiver.answer('hang-up', 200);

    await alerterFor(webhook()).send(alert);

    expect(receiver.requests).toHaveLength(2);
    expect(audit.eventsNamed('alert.sent')[0]).toMatchObject({ attempts: 2 });
  });

  it('reports a refused connection as KR_ALERT_NETWORK after every attempt', async () => {
    const alerter = alerterFor({ siem: { kind: 'webhook', url: await refusedUrl() } });

    await alerter.send(alert);

    expect(audit.eventsNamed('alert.undeliverable')[0]).toMatchObject({
      attempts: 3,
      errorCode: 'KR_ALERT_NETWORK',
      networkCode: 'ECONNREFUSED',
    });
    expect(waits).toEqual([100, 200]);
  });

  it('gives up on a sink that never answers after its timeout', async () => {
    receiver.answer('silence');

    await alerterFor(
      { siem: { kind: 'webhook', url: receiver.url, timeoutMs: 50 } },
      { retry: { attempts: 1, initialBackoffMs: 1 } },
    ).send(alert);

    expect(audit.eventsNamed('alert.undeliverable')[0]).toMatchObject({
      attempts: 1,
      errorCode: 'KR_ALERT_NETWORK',
      networkCode: 'UND_ERR_HEADERS_TIMEOUT',
    });
  });
});

describe('alerter: deduplication', () => {
  it('alerts each sink once per key rotation', async () => {
    const alerter = alerterFor(webhook());

    await alerter.send(alert);
    await alerter.send({ ...alert, step: 'verify', errorCode: 'KR_VERIFY_FAILED' });

    expect(receiver.requests).toHaveLength(1);
    expect(results).toEqual([['siem', 'sent']]);
  });

  it('alerts again for another rotation of the same key, and for another key', async () => {
    const alerter = alerterFor(webhook());

    await alerter.send(alert);
    await alerter.send({ ...alert, rotationId: 'rot-2' });
    await alerter.send({ ...alert, keyId: 'key-2' });

    expect(receiver.requests).toHaveLength(3);
  });

  it('lets a more severe alert of the same rotation through, but not a milder one', async () => {
    const alerter = alerterFor(webhook());

    await alerter.send({ ...alert, severity: 'warning' });
    await alerter.send({ ...alert, severity: 'critical' });
    await alerter.send({ ...alert, severity: 'error' });

    expect(receiver.requests.map((r) => (r.body as Alert).severity)).toEqual(['warning', 'critical']);
  });

  it('dedupes per sink: a second sink named later still gets its first alert', async () => {
    const other = await startReceiver();
    try {
      const alerter = alerterFor({ ...webhook(), audit: { kind: 'webhook', url: other.url } });

      await alerter.send(alert, ['siem']);
      await alerter.send(alert, ['siem', 'audit']);

      expect(receiver.requests).toHaveLength(1);
      expect(other.requests).toHaveLength(1);
    } finally {
      await other.close();
    }
  });

  it('dedupes alerts without a key on step, run and error code', async () => {
    const alerter = alerterFor(webhook());
    const runAlert: Alert = {
      severity: 'critical',
      summary: 'keyroll run aborted',
      rotationId: 'run-1',
      step: 'run',
      errorCode: 'KR_RUN_CREDENTIAL_REFUSED',
      nextAction: 'fix the credential',
    };

    await alerter.send(runAlert);
    await alerter.send(runAlert);
    await alerter.send({ ...runAlert, errorCode: 'KR_RUN_SHUTDOWN' });
    await alerter.send({ ...runAlert, rotationId: 'run-2' });

    expect(receiver.requests).toHaveLength(3);
  });

  it('does not count a deduplicated alert in the metrics hook', async () => {
    const alerter = alerterFor(webhook());

    await alerter.send(alert);
    await alerter.send(alert);

    expect(results).toEqual([['siem', 'sent']]);
    expect(audit.eventsNamed('alert.sent')).toHaveLength(1);
  });
});

describe('alerter: secrets never leave (invariant 3)', () => {
  it('blanks a registered secret, and its base64, from the summary and details before sending', async () => {
    const leaked = new Secret('sk_live_leaked_into_an_error_0001').reveal();
    const base64 = Buffer.from(leaked).toString('base64');

    await alerterFor(webhook()).send({
      ...alert,
      summary: `roll answered ${leaked}`,
      details: { echoed: base64, nested: { again: leaked } },
    });

    const [request] = receiver.requests;
    expectNoSecrets([request!.raw], [leaked]);
    expect(request!.body).toMatchObject({
      summary: 'roll answered [REDACTED]',
      details: { echoed: '[REDACTED]', nested: { again: '[REDACTED]' } },
    });
  });

  it('sends an alert whose details cannot be serialized, without them', async () => {
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    new Secret('sk_live_any_registered_value_0002');

    await alerterFor(webhook()).send({ ...alert, details: cyclic });

    expect(receiver.requests[0]!.body).toMatchObject({
      keyId: 'key-1',
      details: { note: 'details withheld: they could not be serialized' },
    });
  });
});

describe('alerter: sinks and audit', () => {
  it('sends to every defined sink when none is named', async () => {
    const other = await startReceiver();
    try {
      await alerterFor({ ...webhook(), second: { kind: 'webhook', url: other.url } }).send(alert);

      expect(receiver.requests).toHaveLength(1);
      expect(other.requests).toHaveLength(1);
    } finally {
      await other.close();
    }
  });

  it('sends to the default sinks only, when they are given', async () => {
    const other = await startReceiver();
    try {
      await alerterFor(
        { ...webhook(), second: { kind: 'webhook', url: other.url } },
        { defaultSinks: ['second'] },
      ).send(alert);

      expect(receiver.requests).toHaveLength(0);
      expect(other.requests).toHaveLength(1);
    } finally {
      await other.close();
    }
  });

  it('audits a sink name the policy does not define', async () => {
    await alerterFor(webhook()).send(alert, ['nowhere']);

    expect(audit.eventsNamed('alert.undeliverable')[0]).toMatchObject({
      sink: 'nowhere',
      attempts: 0,
      errorCode: 'KR_ALERT_SINK_UNKNOWN',
    });
    expect(results).toEqual([['nowhere', 'failed']]);
  });

  it('audits a reference that cannot be read, without trying to send', async () => {
    await alerterFor({ slack: { kind: 'slack', webhookUrl: 'env:MISSING_SLACK_URL' } }).send(alert);

    expect(audit.eventsNamed('alert.undeliverable')[0]).toMatchObject({
      sink: 'slack',
      sinkKind: 'slack',
      attempts: 0,
      errorCode: 'KR_REF_UNRESOLVED',
    });
  });

  it('audits a webhook sink with neither url nor urlRef', async () => {
    await alerterFor({ siem: { kind: 'webhook' } }).send(alert);

    expect(audit.eventsNamed('alert.undeliverable')[0]).toMatchObject({ errorCode: 'KR_ALERT_SINK_INVALID' });
  });

  it('writes to the audit log it is given with withAudit, context included', async () => {
    const run = createMemoryAuditLog();

    await alerterFor(webhook())
      .withAudit(run.child({ runId: 'run-9', actor: 'alice', reason: 'leak' }))
      .send(alert);

    expect(audit.events).toEqual([]);
    expect(run.eventsNamed('alert.sent')[0]).toMatchObject({
      runId: 'run-9',
      actor: 'alice',
      reason: 'leak',
      rotationId: 'rot-1',
      keyId: 'key-1',
      organizationId: 'org-1',
    });
  });

  it('keeps alerting when the metrics hook throws', async () => {
    const alerter = alerterFor(webhook(), {
      onResult: () => {
        throw new Error('metrics broke');
      },
    });

    await expect(alerter.send(alert)).resolves.toBeUndefined();
    expect(audit.eventsNamed('alert.sent')).toHaveLength(1);
  });
});
