// How long the sanitizer knows a secret (issue 12, section 3): long-lived credentials are pinned
// for their lifetime and survive any number of other registrations; a rotation's secrets live in
// its secret scope and are dropped when it ends; everything else is bounded, oldest evicted first.
import { MockAgent } from 'undici';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { oauthClientCredentials, staticCredential } from '../../src/api/credentials.ts';
import {
  registerSecretValue,
  resetSanitizerForTests,
  sanitizeText,
  withSecretScope,
} from '../../src/audit/sanitize.ts';
import { Secret } from '../../src/audit/secret.ts';
import { resolveRef } from '../../src/refs/secret-ref.ts';

afterEach(() => {
  vi.useRealTimers();
  resetSanitizerForTests();
});

const rolled = (n: number): string => `kmk_live_${String(n).padStart(6, '0')}_${'r'.repeat(24)}`;

function registerMany(count: number): void {
  for (let n = 0; n < count; n++) registerSecretValue(rolled(n));
}

describe('pinned credentials', () => {
  it('stay blanked after 5000 other secrets were registered', () => {
    const credential = new Secret('hvs.CAESIPinnedVaultToken-0123456789abcdef').pinned();

    registerMany(5_000);

    expect(sanitizeText(`token ${credential.reveal()} expired`)).toBe('token [REDACTED] expired');
    // The eviction that a pin prevents still happens to unpinned ones.
    expect(sanitizeText(rolled(0))).toBe(rolled(0));
  });

  it('include every resolved reference (trigger key, bearer token, webhook header)', async () => {
    const value = 'trigger-key-0123456789abcdef0123456789abcdef';
    const secret = await resolveRef('env:KEYROLL_TEST_TRIGGER_KEY', { KEYROLL_TEST_TRIGGER_KEY: value });

    registerMany(5_000);

    expect(sanitizeText(`signed with ${secret.reveal()}`)).toBe('signed with [REDACTED]');
  });

  it('include an OAuth access token, for its lifetime', async () => {
    const agent = new MockAgent();
    agent.disableNetConnect();
    const accessToken = 'eyJhbGciOiJSUzI1NiJ9.oauth-access-token-pinned-0123456789';
    agent
      .get('http://auth.keyroll.test')
      .intercept({ path: '/oauth/token', method: 'POST' })
      .reply(
        200,
        { access_token: accessToken, token_type: 'Bearer', expires_in: 3600 },
        { headers: { 'content-type': 'application/json' } },
      );
    const provider = oauthClientCredentials({
      tokenUrl: 'http://auth.keyroll.test/oauth/token',
      clientId: 'keyroll-client',
      clientSecret: staticCredential(new Secret('oauth-client-secret-value-42')),
      dispatcher: agent,
    });

    await provider.token();
    registerMany(5_000);

    expect(sanitizeText(`Authorization: Bearer ${accessToken}`)).toBe('Authorization: Bearer [REDACTED]');
    await agent.close();
  });

  it('become ordinary (evictable) entries once their lifetime has passed', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const token = new Secret('oauth-access-token-short-lived-0123456789').pinned(60_000);

    vi.setSystemTime(Date.now() + 61_000);
    registerMany(5_000);

    expect(sanitizeText(token.reveal())).toBe(token.reveal());
  });
});

describe('secret scopes (one per rotation)', () => {
  it('drop the secrets first seen inside them when they end', async () => {
    const value = 'kmk_live_rolled_inside_the_rotation_0001';

    const during = await withSecretScope(() => {
      new Secret(value);
      return Promise.resolve(sanitizeText(`stored ${value}`));
    });

    expect(during).toBe('stored [REDACTED]');
    expect(sanitizeText(`stored ${value}`)).toBe(`stored ${value}`);
  });

  it('drop them also when the rotation throws', async () => {
    const value = 'kmk_live_rolled_inside_a_failed_rotation';

    await expect(
      withSecretScope(() => {
        new Secret(value);
        return Promise.reject(new Error('store failed'));
      }),
    ).rejects.toThrow('store failed');

    expect(sanitizeText(value)).toBe(value);
  });

  it('keep a credential pinned inside them, and a value also registered outside', async () => {
    const credential = 'hvs.CAESIVaultTokenFromLoginInRotation';
    const outside = 'kmk_live_registered_outside_any_scope_01';
    new Secret(outside);

    await withSecretScope(async () => {
      await Promise.resolve();
      new Secret(credential).pinned();
      new Secret(outside);
    });

    expect(sanitizeText(`${credential} ${outside}`)).toBe('[REDACTED] [REDACTED]');
  });

  it("are independent: one rotation ending does not drop another one's secret", async () => {
    let finishFirst!: () => void;
    const first = withSecretScope(async () => {
      new Secret('kmk_live_first_rotation_secret_0000001');
      await new Promise<void>((resolve) => {
        finishFirst = resolve;
      });
    });
    let inSecond = '';
    const second = withSecretScope(async () => {
      new Secret('kmk_live_second_rotation_secret_000002');
      finishFirst();
      await first;
      inSecond = sanitizeText('kmk_live_second_rotation_secret_000002');
    });

    await second;

    expect(inSecond).toBe('[REDACTED]');
    expect(sanitizeText('kmk_live_first_rotation_secret_0000001')).toBe(
      'kmk_live_first_rotation_secret_0000001',
    );
  });

  it('hand a registration made after they ended (by a timer they started) to the bounded set', async () => {
    let late: Promise<void> | undefined;
    await withSecretScope(() => {
      late = new Promise<void>((resolve) => {
        setTimeout(() => {
          new Secret('kmk_live_registered_by_a_late_timer_0001');
          resolve();
        }, 5);
      });
      return Promise.resolve();
    });
    await late;

    expect(sanitizeText('kmk_live_registered_by_a_late_timer_0001')).toBe('[REDACTED]');
  });
});
