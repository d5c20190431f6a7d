// The policy's OAuth `audience` reaches the token endpoint as the form field `audience`
// (issue 12 §7: it was accepted and never sent). The spec does not describe the token endpoint;
// the field is the one Auth0, Okta and others read, and a server that does not know it (the
// emulator, RFC 6749 §3.2) ignores it.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { oauthClientCredentials, staticCredential } from '../../src/api/credentials.ts';
import { createNullAuditLog } from '../../src/audit/logger.ts';
import { Secret } from '../../src/audit/secret.ts';
import { startEmulator } from '../../src/emulator/server.ts';
import { parsePolicy } from '../../src/policy/load.ts';
import { createRuntime } from '../../src/rotation/runtime.ts';
import { startReceiver, type Receiver } from '../support/alert-receiver.ts';

const TOKEN_ANSWER = {
  status: 200,
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ access_token: 'issued-access-token-1', token_type: 'Bearer', expires_in: 3600 }),
};

let receiver: Receiver;
beforeEach(async () => {
  receiver = await startReceiver();
});
afterEach(async () => {
  await receiver.close();
});

describe('OAuth audience', () => {
  it('is sent as the form field audience of the token request', async () => {
    receiver.answer(TOKEN_ANSWER);
    const provider = oauthClientCredentials({
      tokenUrl: `${receiver.url}/oauth/token`,
      clientId: 'keyroll',
      clientSecret: staticCredential(new Secret('client-secret-for-audience-test')),
      audience: 'https://keys.example.com/api',
    });
    expect((await provider.token()).reveal()).toBe('issued-access-token-1');
    const form = new URLSearchParams(receiver.requests[0]?.raw);
    expect(form.get('grant_type')).toBe('client_credentials');
    expect(form.get('audience')).toBe('https://keys.example.com/api');
  });

  it('goes from the policy to the token request through the runtime', async () => {
    receiver.answer(TOKEN_ANSWER, 500);
    const policy = parsePolicy(
      `version: 1
api:
  baseUrl: ${receiver.url}
  credential: { type: oauth2, tokenUrl: "${receiver.url}/oauth/token", clientId: keyroll, clientSecret: env:AUDIENCE_TEST_SECRET, audience: "urn:keys" }
backends:
  files: { kind: file, directory: ./unused }
keys:
  - { id: key_a, organization: org_a, destinations: [{ backend: files, path: a.json }], maxAge: 30d }
`,
      'policy.yaml',
    );
    process.env.AUDIENCE_TEST_SECRET = 'client-secret-for-audience-test';
    const runtime = await createRuntime(policy, { audit: createNullAuditLog() });
    try {
      // The second answer (the project list) fails: only the token request matters here.
      await runtime.checkApiCredential().catch(() => undefined);
    } finally {
      await runtime.close();
      delete process.env.AUDIENCE_TEST_SECRET;
    }
    expect(receiver.requests[0]?.path).toBe('/oauth/token');
    expect(new URLSearchParams(receiver.requests[0]?.raw).get('audience')).toBe('urn:keys');
  });

  it('does not stop the emulator, which does not know the field, from issuing a token', async () => {
    const emulator = await startEmulator({ port: 0 });
    try {
      const provider = oauthClientCredentials({
        tokenUrl: `${emulator.url}/oauth/token`,
        clientId: 'demo-keyroll-client',
        clientSecret: staticCredential(new Secret('demo-keyroll-client-secret')),
        audience: 'urn:keys',
      });
      expect((await provider.token()).reveal().length).toBeGreaterThan(10);
    } finally {
      await emulator.close();
    }
  });
});
