// How the rotation function holds keyroll's API credential read from Secrets Manager
// (src/lambda/api-credential.ts): one read per container and cache time, another at once after
// the API refused it, and the value handed to the policy's env:KEYROLL_API_TOKEN through the
// function's own environment object only. The read itself runs against moto in
// test/integration/aws-native-credential.test.ts.
import { describe, expect, it } from 'vitest';
import { refCredential } from '../../src/api/credentials.ts';
import { Secret } from '../../src/audit/secret.ts';
import { API_TOKEN_CACHE_MS, ApiTokenCache, secretApiCredential } from '../../src/lambda/api-credential.ts';

const ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:keyroll/api-credential-AbC123';

/** A secret whose value the test sets; counts its reads. */
function fakeSecret(initial: string): {
  read: () => Promise<Secret>;
  set: (value: string) => void;
  reads: () => number;
} {
  let value = initial;
  let reads = 0;
  return {
    read: () => {
      reads += 1;
      return Promise.resolve(new Secret(value).pinned());
    },
    set: (next) => {
      value = next;
    },
    reads: () => reads,
  };
}

function providerOver(
  secret: ReturnType<typeof fakeSecret>,
  clock: { ms: number },
): { provider: ReturnType<typeof secretApiCredential>; env: NodeJS.ProcessEnv } {
  const env: NodeJS.ProcessEnv = {};
  const provider = secretApiCredential({
    arn: ARN,
    base: refCredential('env:KEYROLL_API_TOKEN', env),
    env,
    read: secret.read,
    cache: new ApiTokenCache(),
    monotonicMs: () => clock.ms,
  });
  return { provider, env };
}

describe("the rotation function's API credential", () => {
  it('reads the secret once per cache time, and the new value after it', async () => {
    const secret = fakeSecret('token-one-0123456789');
    const clock = { ms: 0 };
    const { provider } = providerOver(secret, clock);
    expect((await provider.token()).reveal()).toBe('token-one-0123456789');
    secret.set('token-two-0123456789');
    clock.ms = API_TOKEN_CACHE_MS - 1;
    expect((await provider.token()).reveal()).toBe('token-one-0123456789');
    expect(secret.reads()).toBe(1);
    clock.ms = API_TOKEN_CACHE_MS;
    expect((await provider.token()).reveal()).toBe('token-two-0123456789');
    expect(secret.reads()).toBe(2);
  });

  it('reads the secret again at once after the API refused the value (invalidate)', async () => {
    const secret = fakeSecret('token-one-0123456789');
    const { provider } = providerOver(secret, { ms: 0 });
    await provider.token();
    secret.set('token-two-0123456789');
    provider.invalidate?.();
    expect((await provider.token()).reveal()).toBe('token-two-0123456789');
    expect(secret.reads()).toBe(2);
  });

  it('hands the value to the policy through its own environment object, never process.env, and names only the ARN', async () => {
    const before = process.env.KEYROLL_API_TOKEN;
    const { provider, env } = providerOver(fakeSecret('token-one-0123456789'), { ms: 0 });
    await provider.token();
    expect(env.KEYROLL_API_TOKEN).toBe('token-one-0123456789');
    expect(process.env.KEYROLL_API_TOKEN).toBe(before);
    expect(provider.description).toBe(`env:KEYROLL_API_TOKEN, read from Secrets Manager secret ${ARN}`);
  });

  it('reads again when the function is pointed at another secret', async () => {
    const cache = new ApiTokenCache();
    const one = fakeSecret('token-one-0123456789');
    const two = fakeSecret('token-two-0123456789');
    expect((await cache.get(ARN, one.read, 0)).reveal()).toBe('token-one-0123456789');
    expect((await cache.get(`${ARN}x`, two.read, 1)).reveal()).toBe('token-two-0123456789');
  });
});
