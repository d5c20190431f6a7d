// A hostile or broken alert receiver costs keyroll bounded memory and bounded time (issue 12,
// section 2): an error answer is read no further than a cap, an attempt has a total deadline
// whatever the receiver drips, and a shutdown cuts every delivery off after a short window.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createAlerter, type AlerterOptions } from '../../src/alerts/alerter.ts';
import { AlertSinkConfig } from '../../src/alerts/config.ts';
import { createNotifier } from '../../src/alerts/notify.ts';
import { abandonDeliveriesOn } from '../../src/alerts/shutdown.ts';
import type { Alert } from '../../src/alerts/types.ts';
import { createMemoryAuditLog, type MemoryAuditLog } from '../../src/audit/logger.ts';
import { resetSanitizerForTests } from '../../src/audit/sanitize.ts';
import { Secret } from '../../src/audit/secret.ts';
import { startReceiver, type Receiver } from '../support/alert-receiver.ts';

const MiB = 1024 * 1024;

const alert: Alert = {
  severity: 'critical',
  summary: 'keyroll could not rotate key key-1 (org-1) at step store: vault answered 503',
  keyId: 'key-1',
  organizationId: 'org-1',
  rotationId: 'rot-1',
  step: 'store',
  errorCode: 'KR_BACKEND_UNAVAILABLE',
  nextAction: 'the next run re-rolls it',
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

function alerterFor(
  sink: Record<string, unknown>,
  extra: Partial<AlerterOptions> = {},
): ReturnType<typeof createAlerter> {
  return createAlerter({
    sinks: { hook: AlertSinkConfig.parse({ kind: 'webhook', url: `${receiver.url}/hook`, ...sink }) },
    audit,
    retry: { attempts: 1, initialBackoffMs: 1 },
    sleep: () => Promise.resolve(),
    env: {},
    ...extra,
  });
}

function undeliverable(): Record<string, unknown> | undefined {
  return audit.eventsNamed('alert.undeliverable')[0];
}

describe('alert delivery: error answers are read up to a cap', () => {
  it('stops reading a 64 MiB error answer early and audits a short excerpt', async () => {
    receiver.answer({ status: 400, streamBytes: 64 * MiB });

    await alerterFor({}).send(alert);

    expect(undeliverable()).toMatchObject({
      errorCode: 'KR_ALERT_REJECTED',
      status: 400,
      responseExcerpt: 'e'.repeat(200),
    });
    await receiver.hostileAnswersDone();
    // What the client read plus what the loopback socket buffers held when it closed.
    expect(receiver.bodyBytesSent).toBeLessThan(16 * MiB);
  });

  it('blanks an echoed secret before cutting the excerpt, so no prefix of it survives', async () => {
    const token = new Secret('whk_0123456789abcdefghijklmnopqrstuv').reveal();
    // The token starts at character 181: cutting to 200 first would keep its first 19 characters.
    receiver.answer({ status: 401, body: `${'x'.repeat(180)} ${token} is not a valid token` });

    await alerterFor({}).send(alert);

    const excerpt = String(undeliverable()?.responseExcerpt);
    expect(excerpt).not.toContain(token.slice(0, 6));
    expect(excerpt).toBe(`${'x'.repeat(180)} [REDACTED] is not a`);
  });
});

describe('alert delivery: a total deadline per attempt', () => {
  it('gives up on an error answer dripping one byte at a time by the attempt deadline', async () => {
    receiver.answer({ status: 400, dripMs: 100 });

    await alerterFor({ timeoutMs: 5_000, deadlineMs: 500 }).send(alert);

    expect(undeliverable()).toMatchObject({
      errorCode: 'KR_ALERT_REJECTED',
      status: 400,
      networkCode: 'KR_ALERT_DEADLINE',
    });
  });

  it('counts a 2xx answer whose body drips as delivered, without waiting for the body to end', async () => {
    receiver.answer({ status: 202, dripMs: 100 });

    await alerterFor({ timeoutMs: 5_000, deadlineMs: 500 }).send(alert);

    expect(audit.eventsNamed('alert.sent')[0]).toMatchObject({ sink: 'hook', status: 202 });
  });

  it('ends an attempt whose headers never come at the deadline, even with a longer timeout', async () => {
    receiver.answer('silence', 'silence');

    await alerterFor(
      { timeoutMs: 60_000, deadlineMs: 200 },
      { retry: { attempts: 2, initialBackoffMs: 1 } },
    ).send(alert);

    expect(undeliverable()).toMatchObject({
      attempts: 2,
      errorCode: 'KR_ALERT_NETWORK',
      networkCode: 'KR_ALERT_DEADLINE',
    });
  });
});

describe('alert delivery: shutdown', () => {
  // Timeouts far past the test's own: only the shutdown can end these deliveries.
  const hanging = { timeoutMs: 120_000, deadlineMs: 120_000 };

  it('abandons a hanging delivery once the shutdown window has passed, audited as undelivered', async () => {
    const shutdown = new AbortController();
    receiver.answer('silence');
    const sending = alerterFor(hanging, { signal: shutdown.signal, shutdownWindowMs: 50 }).send(alert);
    await vi.waitFor(() => {
      expect(receiver.requests).toHaveLength(1);
    });

    shutdown.abort(new Error('SIGTERM received'));
    await sending;

    expect(undeliverable()).toMatchObject({
      sink: 'hook',
      attempts: 1,
      errorCode: 'KR_ALERT_ABORTED',
      severity: 'critical',
    });
  });

  it("still delivers to a healthy sink after shutdown began (the run's own warning goes out)", async () => {
    const shutdown = new AbortController();
    shutdown.abort(new Error('SIGTERM received'));

    await alerterFor({}, { signal: shutdown.signal, shutdownWindowMs: 2_000 }).send(alert);

    expect(audit.eventsNamed('alert.sent')).toHaveLength(1);
  });

  it("cuts a retry backoff short at the window's end instead of sleeping it out", async () => {
    const shutdown = new AbortController();
    shutdown.abort(new Error('SIGTERM received'));
    receiver.answer(503);
    // The real sleep: a 10-minute backoff that only the cutoff can end.
    const alerter = createAlerter({
      sinks: { hook: AlertSinkConfig.parse({ kind: 'webhook', url: receiver.url }) },
      audit,
      retry: { attempts: 3, initialBackoffMs: 600_000, maxBackoffMs: 600_000 },
      env: {},
      signal: shutdown.signal,
      shutdownWindowMs: 100,
    });

    await alerter.send(alert);

    expect(receiver.requests).toHaveLength(1);
    expect(undeliverable()).toMatchObject({ attempts: 1, errorCode: 'KR_ALERT_ABORTED' });
  });

  it('reaches alerters and notifiers built without a signal through the process-wide shutdown', async () => {
    const shutdown = new AbortController();
    const release = abandonDeliveriesOn(shutdown.signal);
    try {
      receiver.answer('silence');
      const notifier = createNotifier({
        sinks: { hook: AlertSinkConfig.parse({ kind: 'webhook', url: receiver.url, ...hanging }) },
        audit,
        retry: { attempts: 1, initialBackoffMs: 1 },
        env: {},
        shutdownWindowMs: 50,
      });
      const notifying = notifier.notifySuccess(
        {
          keyId: 'key-1',
          organizationId: 'org-1',
          rotationId: 'rot-1',
          rotatedAt: '2026-03-01T12:00:00.000Z',
          destinations: [],
          stage: 'finished',
        },
        ['hook'],
      );
      await vi.waitFor(() => {
        expect(receiver.requests).toHaveLength(1);
      });

      shutdown.abort(new Error('SIGTERM received'));
      await notifying;

      expect(audit.eventsNamed('notify.failed')[0]).toMatchObject({
        sink: 'hook',
        errorCode: 'KR_ALERT_ABORTED',
      });
    } finally {
      release();
    }
  });
});
