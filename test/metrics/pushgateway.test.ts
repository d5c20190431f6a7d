// The Pushgateway push against a real loopback receiver standing in for the gateway: one PUT of
// the text format to /metrics/job/<job>/<label>/<value>…, credentials from the URL as a header
// (never in messages), and failures as typed errors that quote neither the answer nor the URL's
// credentials.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/metrics/metrics.ts';
import {
  groupingPath,
  MetricsPushError,
  parsePushgatewayUrl,
  pushMetrics,
} from '../../src/metrics/pushgateway.ts';
import { startReceiver, type Receiver } from '../support/alert-receiver.ts';

let gateway: Receiver;
beforeEach(async () => {
  gateway = await startReceiver();
});
afterEach(async () => {
  await gateway.close();
});

describe('pushMetrics', () => {
  it('PUTs the registry in the text format under the job and grouping labels', async () => {
    const metrics = createMetrics({ overdue: false });
    metrics.recordAlert('hook', 'sent');
    await pushMetrics(gateway.url, 'keyroll', metrics.registry, {
      groupings: { command: 'run', shard: '2-of-8' },
    });
    expect(gateway.requests).toHaveLength(1);
    const [request] = gateway.requests;
    expect(request?.method).toBe('PUT');
    expect(request?.path).toBe('/metrics/job/keyroll/command/run/shard/2-of-8');
    expect(request?.headers['content-type']).toContain('text/plain');
    expect(request?.raw).toContain('keyroll_alerts_total{sink="hook",result="sent"} 1');
  });

  it('keeps a path prefix of the gateway URL and sends URL credentials as basic auth', async () => {
    await pushMetrics(
      `http://ops:p%40ss@${gateway.url.slice('http://'.length)}/prefix/`,
      'keyroll',
      createMetrics().registry,
    );
    const [request] = gateway.requests;
    expect(request?.path).toBe('/prefix/metrics/job/keyroll');
    expect(request?.headers.authorization).toBe(`Basic ${Buffer.from('ops:p@ss').toString('base64')}`);
  });

  it('fails with KR_METRICS_PUSH_FAILED naming the status, not the answer body or credentials', async () => {
    gateway.answer({ status: 500, body: 'echo of the request: Authorization: Basic b3BzOnNlY3JldA==' });
    const push = pushMetrics(
      `http://ops:secret@${gateway.url.slice('http://'.length)}`,
      'keyroll',
      createMetrics().registry,
    );
    const error = await push.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MetricsPushError);
    expect(error).toMatchObject({
      code: 'KR_METRICS_PUSH_FAILED',
      status: 500,
      gateway: gateway.url,
      retryable: true,
    });
    expect((error as Error).message).toBe(`the Pushgateway at ${gateway.url} answered 500`);
    expect(JSON.stringify((error as MetricsPushError).toFields())).not.toContain('secret');
  });

  it('fails with KR_METRICS_PUSH_FAILED when nothing listens', async () => {
    const url = gateway.url;
    await gateway.close();
    await expect(pushMetrics(url, 'keyroll', createMetrics().registry)).rejects.toMatchObject({
      code: 'KR_METRICS_PUSH_FAILED',
      gateway: url,
    });
    gateway = await startReceiver();
  });
});

describe('groupingPath and parsePushgatewayUrl', () => {
  it('encodes label values that cannot be a path segment in base64url', () => {
    expect(groupingPath('keyroll', { a: 'x y' })).toBe('/job/keyroll/a/x%20y');
    expect(groupingPath('keyroll', { a: 'a/b', b: '' })).toBe(
      `/job/keyroll/a@base64/${Buffer.from('a/b').toString('base64url')}/b@base64/=`,
    );
  });

  it('refuses non-HTTP URLs as usage errors without echoing the text', () => {
    expect(() => parsePushgatewayUrl('ftp://gw:21')).toThrow(
      expect.objectContaining({ code: 'KR_USAGE' }) as unknown,
    );
    expect(() => parsePushgatewayUrl('not a url with s3cr3t')).toThrow(
      expect.not.objectContaining({ message: expect.stringContaining('s3cr3t') as unknown }) as unknown,
    );
  });
});

describe('Pushgateway credentials from a reference and plain HTTP (issue 12 §6, §7)', () => {
  it('sends user:password from an env: reference as basic auth, and a Bearer value as it is', async () => {
    process.env.KR_TEST_PUSH_AUTH = 'ops:s3cret-from-ref';
    try {
      await pushMetrics(gateway.url, 'keyroll', createMetrics().registry, { auth: 'env:KR_TEST_PUSH_AUTH' });
      expect(gateway.requests[0]?.headers.authorization).toBe(
        `Basic ${Buffer.from('ops:s3cret-from-ref').toString('base64')}`,
      );
      process.env.KR_TEST_PUSH_AUTH = 'Bearer gateway-token-1';
      await pushMetrics(gateway.url, 'keyroll', createMetrics().registry, { auth: 'env:KR_TEST_PUSH_AUTH' });
      expect(gateway.requests[1]?.headers.authorization).toBe('Bearer gateway-token-1');
    } finally {
      delete process.env.KR_TEST_PUSH_AUTH;
    }
  });

  it('an unreadable reference is a failed push naming the reference, not a crash', async () => {
    await expect(
      pushMetrics(gateway.url, 'keyroll', createMetrics().registry, { auth: 'env:KR_TEST_PUSH_AUTH_UNSET' }),
    ).rejects.toMatchObject({
      code: 'KR_METRICS_PUSH_FAILED',
      message: expect.stringContaining('env:KR_TEST_PUSH_AUTH_UNSET') as unknown,
    });
    expect(gateway.requests).toEqual([]);
  });

  it('refuses a literal instead of a reference, and credentials given twice, without echoing them', () => {
    expect(() => parsePushgatewayUrl('https://gw:9091', { auth: 'ops:hunter2' })).toThrow(
      expect.objectContaining({
        code: 'KR_USAGE',
        message: expect.not.stringContaining('hunter2') as unknown,
      }) as unknown,
    );
    expect(() => parsePushgatewayUrl('https://ops:pw@gw:9091', { auth: 'env:X' })).toThrow(
      expect.objectContaining({ code: 'KR_USAGE' }) as unknown,
    );
  });

  it('refuses plain http:// to another machine unless allowInsecureHttp, and accepts loopback', () => {
    expect(() => parsePushgatewayUrl('http://pushgateway.monitoring:9091')).toThrow(
      expect.objectContaining({
        code: 'KR_USAGE',
        message: expect.stringContaining('plain http:// to "pushgateway.monitoring"') as unknown,
      }) as unknown,
    );
    expect(parsePushgatewayUrl('http://pushgateway.monitoring:9091', { allowInsecureHttp: true }).host).toBe(
      'pushgateway.monitoring:9091',
    );
    expect(parsePushgatewayUrl('http://127.0.0.1:9091').host).toBe('127.0.0.1:9091');
    expect(parsePushgatewayUrl('https://pushgateway.monitoring').host).toBe('pushgateway.monitoring');
  });
});
