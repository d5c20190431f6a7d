// Roll answers a real server cannot easily produce: proxies' HTML, truncated bodies, a body that
// carries data.key but breaks the spec elsewhere, errors at exact points of the exchange.
import { errors } from 'undici';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/api/errors.ts';
import { RateLimiter } from '../../src/api/rate-limiter.ts';
import { Secret } from '../../src/audit/secret.ts';
import { API_ORIGIN, BEARER, JSON_HEADERS, mockApi } from './mock-api.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';

const ROLL_PATH = '/v1/auth/keys/key_a/roll';
const NEW_SECRET = 'kmk_live_NEWSECRETnewsecretNEWSECRET0123';

async function rollError(promise: Promise<unknown>): Promise<ApiError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiError);
  return error as ApiError;
}

describe('ApiClient.rollKey', () => {
  it('POSTs to the roll path with the organization, bearer and JSON accept header', async () => {
    const api = mockApi({ userAgent: 'keyroll-test' });
    api.pool
      .intercept({
        path: `${ROLL_PATH}?organizationId=org_1`,
        method: 'POST',
        headers: {
          authorization: `Bearer ${BEARER}`,
          accept: 'application/json',
          'user-agent': 'keyroll-test',
        },
      })
      .reply(200, { success: true, data: { key: NEW_SECRET, keyId: 'key_a' } }, { headers: JSON_HEADERS });
    const rolled = await api.client.rollKey('key_a', { organizationId: 'org_1' });
    expect(rolled.keyId).toBe('key_a');
    expect(rolled.secret.reveal()).toBe(NEW_SECRET);
    expect(rolled.malformed).toBeUndefined();
    await api.done();
  });

  it('uses the method override for the roll', async () => {
    const api = mockApi({ methods: { roll: 'PUT' } });
    api.pool
      .intercept({ path: ROLL_PATH, method: 'PUT' })
      .reply(200, { success: true, data: { key: NEW_SECRET, keyId: 'key_a' } }, { headers: JSON_HEADERS });
    expect((await api.client.rollKey('key_a')).secret.reveal()).toBe(NEW_SECRET);
    await api.done();
  });

  it('keeps a base URL path prefix and escapes the key id', async () => {
    const api = mockApi({ baseUrl: `${API_ORIGIN}/gateway/` });
    api.pool
      .intercept({ path: '/gateway/v1/auth/keys/key%2Fodd/roll', method: 'POST' })
      .reply(200, { success: true, data: { key: NEW_SECRET, keyId: 'key/odd' } }, { headers: JSON_HEADERS });
    expect((await api.client.rollKey('key/odd')).keyId).toBe('key/odd');
    await api.done();
  });

  it('keeps the secret when data.key is present but data.keyId is missing, and says what was wrong', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: ROLL_PATH, method: 'POST' })
      .reply(200, { success: true, data: { key: NEW_SECRET } }, { headers: JSON_HEADERS });
    const rolled = await api.client.rollKey('key_a');
    expect(rolled.secret.reveal()).toBe(NEW_SECRET);
    expect(rolled.keyId).toBe('key_a');
    expect(rolled.malformed).toContain('data.keyId');
    expectNoSecrets([rolled.malformed ?? ''], [NEW_SECRET]);
    await api.done();
  });

  it('keeps the secret when the content type is wrong but the body carries data.key', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: ROLL_PATH, method: 'POST' })
      .reply(200, JSON.stringify({ success: true, data: { key: NEW_SECRET, keyId: 'key_a' } }), {
        headers: { 'content-type': 'text/plain' },
      });
    const rolled = await api.client.rollKey('key_a');
    expect(rolled.secret.reveal()).toBe(NEW_SECRET);
    expect(rolled.malformed).toContain('content-type text/plain');
    await api.done();
  });

  it('keeps the secret and flags it when data.keyId names another key', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: ROLL_PATH, method: 'POST' })
      .reply(200, { success: true, data: { key: NEW_SECRET, keyId: 'key_b' } }, { headers: JSON_HEADERS });
    const rolled = await api.client.rollKey('key_a');
    expect(rolled.keyId).toBe('key_a');
    expect(rolled.malformed).toContain('different key');
    await api.done();
  });

  it('keeps a secret that arrives in a 5xx answer: the roll happened', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: ROLL_PATH, method: 'POST' })
      .reply(500, { success: true, data: { key: NEW_SECRET, keyId: 'key_a' } }, { headers: JSON_HEADERS });
    const rolled = await api.client.rollKey('key_a');
    expect(rolled.secret.reveal()).toBe(NEW_SECRET);
    expect(rolled.malformed).toContain('HTTP 500');
    await api.done();
  });

  it.each([
    [
      'an HTML page from a proxy',
      '<html><body>Gateway says hi</body></html>',
      'text/html',
      'unparseable JSON',
    ],
    ['an empty body', '', 'application/json', 'empty'],
    [
      'truncated JSON',
      `{"success":true,"data":{"key":"${NEW_SECRET.slice(0, 20)}`,
      'application/json',
      'unparseable JSON',
    ],
    [
      'JSON without data.key',
      '{"success":true,"data":{"keyId":"key_a"}}',
      'application/json',
      'no string data.key',
    ],
  ])(
    'treats a 200 with %s as outcome unknown, quoting nothing of it',
    async (_name, body, contentType, why) => {
      const api = mockApi();
      api.pool
        .intercept({ path: ROLL_PATH, method: 'POST' })
        .reply(200, body, { headers: { 'content-type': contentType } });
      const error = await rollError(api.client.rollKey('key_a'));
      expect(error.code).toBe('KR_API_MALFORMED_RESPONSE');
      expect(error.outcomeUnknown).toBe(true);
      expect(error.status).toBe(200);
      expect(error.message).toContain(why);
      expect(error.cause).toBeUndefined();
      if (body !== '') expect(error.message).not.toContain(body.slice(0, 12));
      expect(error.message).not.toContain(NEW_SECRET.slice(0, 20));
      await api.done();
    },
  );

  it('maps an HTML 502 from a proxy to a retryable server error with unknown outcome', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: ROLL_PATH, method: 'POST' })
      .reply(502, '<html>Bad Gateway</html>', { headers: { 'content-type': 'text/html' } });
    const error = await rollError(api.client.rollKey('key_a'));
    expect(error.code).toBe('KR_API_SERVER_ERROR');
    expect(error.status).toBe(502);
    expect(error.apiCode).toBeUndefined();
    expect(error.retryable).toBe(true);
    expect(error.outcomeUnknown).toBe(true);
    expect(error.message).toContain('text/html');
    expect(error.message).not.toContain('Bad Gateway');
    await api.done();
  });

  it('carries the spec error fields of a 403 and a known outcome', async () => {
    const api = mockApi();
    api.pool.intercept({ path: ROLL_PATH, method: 'POST' }).reply(
      403,
      {
        success: false,
        error: {
          code: 'FORBIDDEN',
          message: 'API keys cannot roll keys',
          details: { principal: 'apiKey' },
        },
      },
      { headers: JSON_HEADERS },
    );
    const error = await rollError(api.client.rollKey('key_a'));
    expect(error.code).toBe('KR_API_FORBIDDEN');
    expect(error.apiCode).toBe('FORBIDDEN');
    expect(error.apiMessage).toBe('API keys cannot roll keys');
    expect(error.details).toEqual({ principal: 'apiKey' });
    expect(error.outcomeUnknown).toBe(false);
    expect(error.retryable).toBe(false);
    await api.done();
  });

  it('reads an HTTP-date Retry-After on 429 and pauses the shared limiter for that long', async () => {
    const now = Date.parse('2030-01-01T00:00:00Z');
    const limiter = new RateLimiter({ perMinute: 600, now: () => now });
    const api = mockApi({ limiter, now: () => now });
    api.pool
      .intercept({ path: ROLL_PATH, method: 'POST' })
      .reply(
        429,
        { success: false, error: { code: 'RATE_LIMITED', message: 'slow down' } },
        { headers: { ...JSON_HEADERS, 'retry-after': 'Tue, 01 Jan 2030 00:00:30 GMT' } },
      );
    const error = await rollError(api.client.rollKey('key_a'));
    expect(error.code).toBe('KR_API_RATE_LIMITED');
    expect(error.retryAfterMs).toBe(30_000);
    expect(error.retryable).toBe(true);
    expect(error.outcomeUnknown).toBe(false);
    expect(limiter.pausedUntil()).toBe(now + 30_000);
    await api.done();
  });

  it('treats a dropped connection as outcome unknown', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: ROLL_PATH, method: 'POST' })
      .replyWithError(new errors.SocketError('other side closed'));
    const error = await rollError(api.client.rollKey('key_a'));
    expect(error.code).toBe('KR_API_CONNECTION');
    expect(error.outcomeUnknown).toBe(true);
    expect(error.retryable).toBe(true);
    await api.done();
  });

  it('treats a refused connection as not rolled', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: ROLL_PATH, method: 'POST' })
      .replyWithError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
    const error = await rollError(api.client.rollKey('key_a'));
    expect(error.code).toBe('KR_API_CONNECTION');
    expect(error.outcomeUnknown).toBe(false);
    await api.done();
  });

  it('retries once with a fresh token after a 401 when the credential can be invalidated', async () => {
    let invalidations = 0;
    let issued = 0;
    const api = mockApi({
      credentials: {
        description: 'test oauth',
        token: () => {
          issued += 1;
          return Promise.resolve(new Secret(`oauth-access-token-${issued}`));
        },
        invalidate: () => {
          invalidations += 1;
        },
      },
    });
    api.pool
      .intercept({
        path: ROLL_PATH,
        method: 'POST',
        headers: { authorization: 'Bearer oauth-access-token-1' },
      })
      .reply(
        401,
        { success: false, error: { code: 'UNAUTHORIZED', message: 'expired' } },
        { headers: JSON_HEADERS },
      );
    api.pool
      .intercept({
        path: ROLL_PATH,
        method: 'POST',
        headers: { authorization: 'Bearer oauth-access-token-2' },
      })
      .reply(200, { success: true, data: { key: NEW_SECRET, keyId: 'key_a' } }, { headers: JSON_HEADERS });
    expect((await api.client.rollKey('key_a')).secret.reveal()).toBe(NEW_SECRET);
    expect(invalidations).toBe(1);
    await api.done();
  });

  it('reports 401 at once for a credential that cannot be refreshed', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: ROLL_PATH, method: 'POST' })
      .reply(
        401,
        { success: false, error: { code: 'UNAUTHORIZED', message: 'invalid' } },
        { headers: JSON_HEADERS },
      );
    const error = await rollError(api.client.rollKey('key_a'));
    expect(error.code).toBe('KR_API_UNAUTHORIZED');
    expect(error.status).toBe(401);
    await api.done();
  });

  it('refuses an empty key id before sending anything', async () => {
    const api = mockApi();
    await expect(api.client.rollKey('')).rejects.toThrow(TypeError);
    await api.done();
  });
});
