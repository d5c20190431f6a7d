import { inspect } from 'node:util';
import { MockAgent } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  oauthClientCredentials,
  staticCredential,
  type CredentialProvider,
} from '../../src/api/credentials.ts';
import { CredentialError } from '../../src/api/errors.ts';
import { Secret } from '../../src/audit/secret.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';

const ORIGIN = 'http://auth.keyroll.test';
const TOKEN_URL = `${ORIGIN}/oauth/token`;
const CLIENT_SECRET = 'oauth-client-secret-value-42';
const JSON_HEADERS = { headers: { 'content-type': 'application/json' } };

let agent: MockAgent;
let t: number;

beforeEach(() => {
  agent = new MockAgent();
  agent.disableNetConnect();
  t = 1_000_000;
});

afterEach(async () => {
  agent.assertNoPendingInterceptors();
  await agent.close();
});

function provider(
  overrides: {
    refreshBeforeMs?: number;
    authMethod?: 'post' | 'basic';
    clientSecret?: CredentialProvider;
  } = {},
): CredentialProvider {
  return oauthClientCredentials({
    tokenUrl: TOKEN_URL,
    clientId: 'keyroll-client',
    clientSecret: overrides.clientSecret ?? staticCredential(new Secret(CLIENT_SECRET)),
    scope: 'keys:roll',
    dispatcher: agent,
    now: () => t,
    ...(overrides.refreshBeforeMs === undefined ? {} : { refreshBeforeMs: overrides.refreshBeforeMs }),
    ...(overrides.authMethod === undefined ? {} : { authMethod: overrides.authMethod }),
  });
}

function replyToken(accessToken: string, expiresIn?: number): void {
  agent
    .get(ORIGIN)
    .intercept({ path: '/oauth/token', method: 'POST' })
    .reply(
      200,
      {
        access_token: accessToken,
        token_type: 'Bearer',
        ...(expiresIn === undefined ? {} : { expires_in: expiresIn }),
      },
      JSON_HEADERS,
    );
}

describe('oauthClientCredentials', () => {
  it('asks for a client_credentials grant with id, secret and scope in the form body', async () => {
    let form: URLSearchParams | undefined;
    agent
      .get(ORIGIN)
      .intercept({
        path: '/oauth/token',
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: (body) => {
          form = new URLSearchParams(body);
          return true;
        },
      })
      .reply(
        200,
        { access_token: 'access-token-aaaa', token_type: 'Bearer', expires_in: 3600 },
        JSON_HEADERS,
      );
    expect((await provider().token()).reveal()).toBe('access-token-aaaa');
    expect(Object.fromEntries(form!)).toEqual({
      grant_type: 'client_credentials',
      client_id: 'keyroll-client',
      client_secret: CLIENT_SECRET,
      scope: 'keys:roll',
    });
  });

  it('authenticates with HTTP Basic when asked, leaving the secret out of the body', async () => {
    const basic = `Basic ${Buffer.from(`keyroll-client:${CLIENT_SECRET}`).toString('base64')}`;
    agent
      .get(ORIGIN)
      .intercept({
        path: '/oauth/token',
        method: 'POST',
        headers: { authorization: basic },
        body: (body) => !body.includes('client_secret'),
      })
      .reply(
        200,
        { access_token: 'access-token-basic', token_type: 'bearer', expires_in: 3600 },
        JSON_HEADERS,
      );
    expect((await provider({ authMethod: 'basic' }).token()).reveal()).toBe('access-token-basic');
  });

  it('reuses the cached token until the refresh point', async () => {
    replyToken('access-token-cached', 300);
    const oauth = provider({ refreshBeforeMs: 60_000 });
    await oauth.token();
    t += 239_000;
    // No second interceptor: a second request would fail the test (net connect is disabled).
    expect((await oauth.token()).reveal()).toBe('access-token-cached');
  });

  it('refreshes refreshBeforeMs before expiry', async () => {
    replyToken('access-token-one', 300);
    replyToken('access-token-two', 300);
    const oauth = provider({ refreshBeforeMs: 60_000 });
    expect((await oauth.token()).reveal()).toBe('access-token-one');
    t += 240_000;
    expect((await oauth.token()).reveal()).toBe('access-token-two');
  });

  it('refreshes at half the lifetime when refreshBeforeMs exceeds it', async () => {
    replyToken('access-token-short-1', 60);
    replyToken('access-token-short-2', 60);
    const oauth = provider({ refreshBeforeMs: 300_000 });
    await oauth.token();
    t += 29_000;
    expect((await oauth.token()).reveal()).toBe('access-token-short-1');
    t += 1_000;
    expect((await oauth.token()).reveal()).toBe('access-token-short-2');
  });

  it('shares one token request between concurrent callers', async () => {
    replyToken('access-token-shared', 3600);
    const oauth = provider();
    const tokens = await Promise.all([oauth.token(), oauth.token(), oauth.token()]);
    expect(new Set(tokens.map((token) => token.reveal()))).toEqual(new Set(['access-token-shared']));
  });

  it('keeps using a still-valid token when an early refresh fails', async () => {
    replyToken('access-token-still-valid', 300);
    agent
      .get(ORIGIN)
      .intercept({ path: '/oauth/token', method: 'POST' })
      .reply(503, { error: 'temporarily_unavailable' }, JSON_HEADERS);
    const oauth = provider({ refreshBeforeMs: 60_000 });
    await oauth.token();
    t += 250_000;
    expect((await oauth.token()).reveal()).toBe('access-token-still-valid');
  });

  it('fails once the token has expired and the refresh still fails', async () => {
    replyToken('access-token-expiring', 300);
    agent
      .get(ORIGIN)
      .intercept({ path: '/oauth/token', method: 'POST' })
      .reply(503, { error: 'temporarily_unavailable' }, JSON_HEADERS);
    const oauth = provider();
    await oauth.token();
    t += 300_000;
    const error = await oauth.token().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CredentialError);
    expect((error as CredentialError).retryable).toBe(true);
  });

  it('fetches a new token after invalidate (the API answered 401)', async () => {
    replyToken('access-token-revoked', 3600);
    replyToken('access-token-fresh', 3600);
    const oauth = provider();
    await oauth.token();
    oauth.invalidate?.();
    expect((await oauth.token()).reveal()).toBe('access-token-fresh');
  });

  it('reports a refused client with the OAuth error code, never the client secret', async () => {
    agent
      .get(ORIGIN)
      .intercept({ path: '/oauth/token', method: 'POST' })
      .reply(
        401,
        { error: 'invalid_client', error_description: `bad secret ${CLIENT_SECRET}` },
        JSON_HEADERS,
      );
    const error = (await provider()
      .token()
      .catch((e: unknown) => e)) as CredentialError;
    expect(error).toBeInstanceOf(CredentialError);
    expect(error.code).toBe('KR_CREDENTIAL_UNAVAILABLE');
    expect(error.status).toBe(401);
    expect(error.oauthError).toBe('invalid_client');
    expect(error.retryable).toBe(false);
    expect(error.credential).toContain(TOKEN_URL);
    expectNoSecrets([inspect(error, { depth: 5 }) + JSON.stringify(error.toFields())], [CLIENT_SECRET]);
  });

  it('refuses an answer without a bearer token, without quoting the body', async () => {
    agent
      .get(ORIGIN)
      .intercept({ path: '/oauth/token', method: 'POST' })
      .reply(200, { access_token: 'access-token-mac-type', token_type: 'mac' }, JSON_HEADERS);
    const error = (await provider()
      .token()
      .catch((e: unknown) => e)) as CredentialError;
    expect(error).toBeInstanceOf(CredentialError);
    expect(error.message).toContain('without a usable bearer token');
    expect(inspect(error, { depth: 5 })).not.toContain('access-token-mac-type');
  });

  it('names the client secret reference when it cannot be read', async () => {
    const error = (await provider({
      clientSecret: {
        description: 'file:/nonexistent/secret',
        token: () => Promise.reject(new Error('ENOENT')),
      },
    })
      .token()
      .catch((e: unknown) => e)) as CredentialError;
    expect(error).toBeInstanceOf(CredentialError);
    expect(error.message).toContain('file:/nonexistent/secret');
  });

  it('reports a dropped token request as retryable', async () => {
    agent
      .get(ORIGIN)
      .intercept({ path: '/oauth/token', method: 'POST' })
      .replyWithError(new Error('socket hang up'));
    const error = (await provider()
      .token()
      .catch((e: unknown) => e)) as CredentialError;
    expect(error).toBeInstanceOf(CredentialError);
    expect(error.retryable).toBe(true);
  });
});
