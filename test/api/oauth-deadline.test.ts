// The OAuth token request has a total deadline and a small body cap: a token endpoint that drips
// its answer, or streams a huge one, cannot hold keyroll before its first roll (issue 12, section 2).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  oauthClientCredentials,
  staticCredential,
  type CredentialProvider,
} from '../../src/api/credentials.ts';
import { CredentialError } from '../../src/api/errors.ts';
import { resetSanitizerForTests } from '../../src/audit/sanitize.ts';
import { Secret } from '../../src/audit/secret.ts';
import { startReceiver, type Receiver } from '../support/alert-receiver.ts';

const MiB = 1024 * 1024;

let endpoint: Receiver;
beforeEach(async () => {
  endpoint = await startReceiver();
});
afterEach(async () => {
  await endpoint.close();
  resetSanitizerForTests();
});

function provider(): CredentialProvider {
  return oauthClientCredentials({
    tokenUrl: `${endpoint.url}/oauth/token`,
    clientId: 'keyroll-client',
    clientSecret: staticCredential(new Secret('oauth-client-secret-value-42')),
    timeoutMs: 500,
  });
}

describe('OAuth token request: an endpoint that does not end its answer', () => {
  it('gives up on an answer dripping one byte at a time by the deadline', async () => {
    endpoint.answer({ status: 200, dripMs: 100 });

    const error = await provider()
      .token()
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(CredentialError);
    expect(error).toMatchObject({
      retryable: true,
      message: expect.stringContaining('failed before an answer') as unknown,
    });
  });

  it('refuses an answer past 64 KiB, even one that holds a token', async () => {
    const answer = `${JSON.stringify({ access_token: 'oauth-access-token-padded-0001', token_type: 'Bearer' })}${' '.repeat(MiB)}`;
    endpoint.answer({ status: 200, headers: { 'content-type': 'application/json' }, body: answer });

    await expect(provider().token()).rejects.toBeInstanceOf(CredentialError);
  });
});
