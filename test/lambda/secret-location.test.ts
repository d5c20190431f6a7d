// The rotation function matches an event's secret by where it lives, not only by its name
// (src/lambda/secret-location.ts): Secrets Manager sends the secret's ARN, and a secret of the
// same name in another account, region or partition is not the policy's destination. Such an
// event is refused with KR_NATIVE_ARN_MISMATCH before any request reaches Secrets Manager (a
// loopback server stands in for it and counts what it receives).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { staticCredential } from '../../src/api/credentials.ts';
import { createAuditLog } from '../../src/audit/logger.ts';
import { Secret } from '../../src/audit/secret.ts';
import { AwsBackendConfig } from '../../src/backends/aws/config.ts';
import { runRotationStep } from '../../src/lambda/handler.ts';
import {
  destinationLocation,
  functionLocation,
  nativeKeyFor,
  parseSecretArn,
} from '../../src/lambda/secret-location.ts';
import type { KeyPolicy, Policy } from '../../src/policy/schema.ts';
import { JSON_SHAPE, RecordingAlerter, keyPolicy } from '../rotation/harness.ts';

const ACCOUNT = '123456789012';
const OTHER_ACCOUNT = '210987654321';
const FUNCTION_ARN = `arn:aws:lambda:eu-west-1:${ACCOUNT}:function:keyroll-keyroll-rotation`;
const secretArn = (
  options: { partition?: string; region?: string; account?: string; name?: string } = {},
): string =>
  `arn:${options.partition ?? 'aws'}:secretsmanager:${options.region ?? 'eu-west-1'}:${options.account ?? ACCOUNT}:secret:${options.name ?? 'keyroll/billing'}-AbC123`;

function entry(id: string, path: string, backend = 'aws'): KeyPolicy {
  return keyPolicy(id, 'org_acme', {
    slots: ['key_a', 'key_b'],
    scheduler: 'aws-native',
    destinations: [{ backend, target: { path, shape: JSON_SHAPE } }],
  });
}

function policyOf(
  keys: KeyPolicy[],
  backends: Record<string, { region?: string; endpoint?: string }> = { aws: { region: 'eu-west-1' } },
): Policy {
  return {
    file: 'native.yaml',
    api: {
      baseUrl: 'http://127.0.0.1:1',
      credential: { type: 'bearer', token: 'env:UNUSED' },
      methods: { roll: 'POST', listProjects: 'GET', updateProject: 'PATCH', updateConsent: 'PATCH' },
      timeouts: { headersMs: 1000, bodyMs: 1000 },
      rateLimitPerMinute: 6000,
    },
    backends: Object.fromEntries(
      Object.entries(backends).map(([name, config]) => [
        name,
        AwsBackendConfig.parse({ kind: 'aws', allowInsecureHttp: true, ...config }),
      ]),
    ),
    alerts: { sinks: {} },
    keys,
  };
}

/** A stand-in for Secrets Manager: counts requests, refuses each (AccessDenied: no retries). */
let secretsManager: Server;
let requests: number;
let endpoint: string;

beforeEach(async () => {
  requests = 0;
  secretsManager = createServer((_request, response) => {
    requests += 1;
    response
      .writeHead(400, { 'content-type': 'application/x-amz-json-1.1' })
      .end(JSON.stringify({ __type: 'AccessDeniedException', message: 'stand-in' }));
  });
  await new Promise<void>((resolve) => secretsManager.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${String((secretsManager.address() as AddressInfo).port)}`;
});
afterEach(async () => {
  await new Promise((resolve) => secretsManager.close(resolve));
});

/** One createSecret of the function, as Lambda runs it (its own ARN from the context, AWS_REGION in its environment). */
async function invoke(
  secretId: string,
  policy: Policy,
  options: { functionArn?: string; region?: string } = {},
): Promise<unknown> {
  try {
    await runRotationStep(
      {
        Step: 'createSecret',
        SecretId: secretId,
        ClientRequestToken: '0f7e2c1a-5b4d-4e8f-9a6b-3c2d1e0f9a8b',
      },
      {
        policy,
        audit: createAuditLog({ destination: { write: () => undefined } }),
        env: {
          AWS_ACCESS_KEY_ID: 'AKIDTEST',
          AWS_SECRET_ACCESS_KEY: 'test-secret-key',
          AWS_REGION: options.region ?? 'eu-west-1',
        },
        runtime: {
          alerter: new RecordingAlerter(),
          credentials: staticCredential(new Secret('unused-token-0123456789')),
          sleep: () => Promise.resolve(),
        },
        ...(options.functionArn === undefined ? {} : { functionArn: options.functionArn }),
      },
    );
    return undefined;
  } catch (error) {
    return error;
  }
}

describe('an event for a secret of the same name elsewhere is refused before any AWS request', () => {
  it("another account than the function's: KR_NATIVE_ARN_MISMATCH, naming both accounts", async () => {
    const error = await invoke(
      secretArn({ account: OTHER_ACCOUNT }),
      policyOf([entry('billing-api', 'keyroll/billing')], { aws: { region: 'eu-west-1', endpoint } }),
      { functionArn: FUNCTION_ARN },
    );
    expect(error).toMatchObject({ code: 'KR_NATIVE_ARN_MISMATCH' });
    expect((error as Error).message).toContain(`account ${OTHER_ACCOUNT} (the destination's: ${ACCOUNT})`);
    expect((error as Error).message).toContain('nothing was rolled');
    expect(requests).toBe(0);
  });

  it("another region than the destination backend's", async () => {
    const error = await invoke(
      secretArn({ region: 'us-east-1' }),
      policyOf([entry('billing-api', 'keyroll/billing')], { aws: { region: 'eu-west-1', endpoint } }),
      { functionArn: FUNCTION_ARN },
    );
    expect(error).toMatchObject({ code: 'KR_NATIVE_ARN_MISMATCH' });
    expect((error as Error).message).toContain("region us-east-1 (the destination's: eu-west-1)");
    expect(requests).toBe(0);
  });

  it("another region than the function's own, when the backend names none (invoked without a Lambda context)", async () => {
    const error = await invoke(
      secretArn({ region: 'us-east-1' }),
      policyOf([entry('billing-api', 'keyroll/billing')], { aws: { endpoint } }),
      { region: 'eu-west-1' },
    );
    expect(error).toMatchObject({ code: 'KR_NATIVE_ARN_MISMATCH' });
    expect(requests).toBe(0);
  });

  it("another partition than the function's", async () => {
    const error = await invoke(
      secretArn({ partition: 'aws-cn' }),
      policyOf([entry('billing-api', 'keyroll/billing')], { aws: { region: 'eu-west-1', endpoint } }),
      { functionArn: FUNCTION_ARN },
    );
    expect(error).toMatchObject({ code: 'KR_NATIVE_ARN_MISMATCH' });
    expect(requests).toBe(0);
  });

  it('another account than the one of the ARN the policy names as the destination', async () => {
    const path = secretArn({ account: '111111111111' });
    const error = await invoke(
      secretArn({ account: OTHER_ACCOUNT }),
      policyOf([entry('billing-api', path)], { aws: { region: 'eu-west-1', endpoint } }),
      { functionArn: FUNCTION_ARN },
    );
    expect(error).toMatchObject({ code: 'KR_NATIVE_ARN_MISMATCH' });
    expect(requests).toBe(0);
  });
});

describe('the entry an ARN names, where it lives', () => {
  const fn = functionLocation(FUNCTION_ARN, {});

  it('reads partition, region, account and name out of the ARNs', () => {
    expect(parseSecretArn(secretArn({ partition: 'aws-us-gov', region: 'us-gov-west-1' }))).toEqual({
      partition: 'aws-us-gov',
      region: 'us-gov-west-1',
      account: ACCOUNT,
      name: 'keyroll/billing',
    });
    expect(parseSecretArn('keyroll/billing')).toBeUndefined();
    expect(fn).toEqual({ partition: 'aws', region: 'eu-west-1', account: ACCOUNT });
    expect(functionLocation(undefined, { AWS_REGION: 'us-east-1' })).toEqual({ region: 'us-east-1' });
  });

  it('matches the secret of the same name in the same account and region, by name or by ARN', () => {
    expect(nativeKeyFor(policyOf([entry('billing-api', 'keyroll/billing')]), secretArn(), fn).id).toBe(
      'billing-api',
    );
    expect(nativeKeyFor(policyOf([entry('billing-api', secretArn())]), secretArn(), fn).id).toBe(
      'billing-api',
    );
    // A cross-account destination named by its ARN is that account's, whatever the function's.
    const foreign = secretArn({ account: OTHER_ACCOUNT });
    expect(nativeKeyFor(policyOf([entry('billing-api', foreign)]), foreign, fn).id).toBe('billing-api');
  });

  it('of two entries with one name in two regions, picks the one where the secret is', () => {
    const policy = policyOf(
      [entry('billing-eu', 'keyroll/billing', 'eu'), entry('billing-us', 'keyroll/billing', 'us')],
      { eu: { region: 'eu-west-1' }, us: { region: 'us-east-1' } },
    );
    expect(nativeKeyFor(policy, secretArn({ region: 'us-east-1' }), fn).id).toBe('billing-us');
    expect(nativeKeyFor(policy, secretArn({ region: 'eu-west-1' }), fn).id).toBe('billing-eu');
    expect(destinationLocation(policy, entry('billing-us', 'keyroll/billing', 'us'), fn)).toEqual({
      partition: 'aws',
      region: 'us-east-1',
      account: ACCOUNT,
    });
  });

  it('a secret no entry names is not configured, whatever its account', () => {
    expect(() =>
      nativeKeyFor(
        policyOf([entry('billing-api', 'keyroll/billing')]),
        secretArn({ name: 'keyroll/other', account: OTHER_ACCOUNT }),
        fn,
      ),
    ).toThrow(expect.objectContaining({ code: 'KR_NATIVE_NOT_CONFIGURED' }));
  });
});
