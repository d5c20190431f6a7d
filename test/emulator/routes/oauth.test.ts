// POST /oauth/token: the client-credentials grant the emulator adds so keyroll's OAuth2
// credential can be exercised; answers follow RFC 6749, tokens expire on the injected clock.
import { afterEach, describe, expect, it } from 'vitest';
import { dataOf, expectError, startTestEmulator, type Answer, type EmulatorEnv } from '../support.ts';
import { expectNoSecrets } from '../../support/secret-scan.ts';

const CLIENT = { client_id: 'demo-keyroll-client', client_secret: 'demo-keyroll-client-secret' };

let env: EmulatorEnv | undefined;
afterEach(async () => {
  await env?.emu.close();
  env = undefined;
});

function tokenRequest(fields: Record<string, string>, headers: Record<string, string> = {}): Promise<Answer> {
  if (env === undefined) throw new Error('emulator not started');
  return env.api.call('POST', '/oauth/token', {
    rawBody: new URLSearchParams(fields).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
  });
}

describe('emulator /oauth/token', () => {
  it('issues a Bearer token for a seeded client (form body) that authenticates API calls as its principal', async () => {
    env = await startTestEmulator();
    const answer = await tokenRequest({ grant_type: 'client_credentials', ...CLIENT });
    expect(answer.status).toBe(200);
    expect(answer.headers['cache-control']).toBe('no-store');
    const body = answer.body as {
      access_token: string;
      token_type: string;
      expires_in: number;
      scope: string;
    };
    expect(body).toMatchObject({
      token_type: 'Bearer',
      expires_in: 3600,
      scope: 'keys:roll projects:read projects:write',
    });
    // svc_demo_keyroll is an admin of org_demo_acme: it may roll.
    expect(dataOf<{ keyId: string }>(await env.api.roll('key_demo_billing', body.access_token)).keyId).toBe(
      'key_demo_billing',
    );
  });

  it('accepts a JSON body and HTTP Basic client authentication', async () => {
    env = await startTestEmulator();
    const json = await env.api.call('POST', '/oauth/token', {
      json: { grant_type: 'client_credentials', ...CLIENT },
    });
    expect(json.status).toBe(200);
    const basic = Buffer.from(`${CLIENT.client_id}:${CLIENT.client_secret}`).toString('base64');
    const viaBasic = await tokenRequest(
      { grant_type: 'client_credentials' },
      { authorization: `Basic ${basic}` },
    );
    expect(viaBasic.status).toBe(200);
  });

  it('grants a requested subset of the client scopes and refuses others with invalid_scope', async () => {
    env = await startTestEmulator();
    const subset = await tokenRequest({ grant_type: 'client_credentials', scope: 'keys:roll', ...CLIENT });
    expect((subset.body as { scope: string }).scope).toBe('keys:roll');
    const refused = await tokenRequest({
      grant_type: 'client_credentials',
      scope: 'keys:roll admin:all',
      ...CLIENT,
    });
    expect({ status: refused.status, error: (refused.body as { error: string }).error }).toEqual({
      status: 400,
      error: 'invalid_scope',
    });
  });

  it('refuses a wrong client secret with 401 invalid_client and never echoes it', async () => {
    env = await startTestEmulator();
    const answer = await tokenRequest({
      grant_type: 'client_credentials',
      client_id: CLIENT.client_id,
      client_secret: 'wrong-secret-value',
    });
    expect({ status: answer.status, error: (answer.body as { error: string }).error }).toEqual({
      status: 401,
      error: 'invalid_client',
    });
    expectNoSecrets([answer.text], ['wrong-secret-value']);
  });

  it('refuses a missing or unsupported grant_type with RFC 6749 errors', async () => {
    env = await startTestEmulator();
    const missing = await tokenRequest({ ...CLIENT });
    expect({ status: missing.status, error: (missing.body as { error: string }).error }).toEqual({
      status: 400,
      error: 'invalid_request',
    });
    const password = await tokenRequest({ grant_type: 'password', ...CLIENT });
    expect({ status: password.status, error: (password.body as { error: string }).error }).toEqual({
      status: 400,
      error: 'unsupported_grant_type',
    });
  });

  it('tokens expire after the configured lifetime: the API then answers 401', async () => {
    env = await startTestEmulator({ oauthTokenTtlSeconds: 120 });
    const answer = await tokenRequest({ grant_type: 'client_credentials', ...CLIENT });
    const { access_token: token, expires_in: ttl } = answer.body as {
      access_token: string;
      expires_in: number;
    };
    expect(ttl).toBe(120);
    env.clock.advance(119_000);
    expect((await env.api.list('?limit=1', token)).status).toBe(200);
    env.clock.advance(1_000);
    expectError(await env.api.list('?limit=1', token), 401, 'UNAUTHORIZED');
  });
});
