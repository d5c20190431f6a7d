// How AWS failures become BackendErrors. The mapping table is tested on SDK-shaped errors; the
// few answers moto cannot give (throttling, a 500, an error message echoing the request, a
// garbled success body) are served by nock, each marked as such. Everything moto can show
// (not found, access denied, conflicts, closed port, timeout) is in test/integration.
import { inspect } from 'node:util';
import nock from 'nock';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../../src/audit/secret.ts';
import { AwsBackendConfig } from '../../../src/backends/aws/config.ts';
import { toBackendError } from '../../../src/backends/aws/errors.ts';
import { createAwsBackend } from '../../../src/backends/aws/index.ts';
import { BackendError } from '../../../src/backends/errors.ts';
import type { Backend, StoreTarget } from '../../../src/backends/types.ts';

function sdkError(name: string, status?: number, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(`${name} happened`), {
    name,
    ...(status === undefined ? {} : { $metadata: { httpStatusCode: status } }),
    ...extra,
  });
}

const context = {
  backend: 'aws-main',
  operation: 'write',
  action: 'DescribeSecret',
  path: 'app/key',
} as const;

describe('aws error mapping', () => {
  it.each([
    ['ResourceNotFoundException', 400, 'KR_BACKEND_NOT_FOUND', false],
    ['AccessDeniedException', 400, 'KR_BACKEND_DENIED', false],
    ['UnrecognizedClientException', 400, 'KR_BACKEND_DENIED', false],
    ['ExpiredTokenException', 400, 'KR_BACKEND_DENIED', false],
    ['DecryptionFailure', 400, 'KR_BACKEND_DENIED', false],
    ['ResourceExistsException', 400, 'KR_BACKEND_CONFLICT', false],
    ['ThrottlingException', 400, 'KR_BACKEND_THROTTLED', true],
    ['InternalServiceError', 500, 'KR_BACKEND_UNAVAILABLE', true],
    ['TimeoutError', undefined, 'KR_BACKEND_TIMEOUT', true],
    ['InvalidParameterException', 400, 'KR_BACKEND_FAILED', false],
    ['LimitExceededException', 400, 'KR_BACKEND_FAILED', false],
  ])('maps %s to its code', (name, status, code, retryable) => {
    const error = toBackendError(sdkError(name, status), context);
    expect(error).toMatchObject({
      code,
      retryable,
      backend: 'aws-main',
      kind: 'aws',
      operation: 'write',
      path: 'app/key',
    });
  });

  it("maps a put's LimitExceededException to the secret's version quota, not retryable, and says what frees it", () => {
    const error = toBackendError(sdkError('LimitExceededException', 400), {
      ...context,
      action: 'PutSecretValue',
    });
    expect(error).toMatchObject({ code: 'KR_BACKEND_VERSION_QUOTA', retryable: false, path: 'app/key' });
    expect(error.message).toMatch(/version quota.*24 h/);
  });

  it.each([
    ["You can't perform this operation on the secret because it was marked for deletion."],
    ["You can't create this secret because a secret with this name is already scheduled for deletion."],
    ["You tried to perform the operation on a secret that's currently marked deleted."],
  ])(
    'maps an InvalidRequestException about deletion (%s) to KR_BACKEND_SCHEDULED_FOR_DELETION',
    (message) => {
      const error = toBackendError(
        Object.assign(new Error(message), {
          name: 'InvalidRequestException',
          $metadata: { httpStatusCode: 400 },
        }),
        { ...context, action: 'GetSecretValue' },
      );
      expect(error).toMatchObject({ code: 'KR_BACKEND_SCHEDULED_FOR_DELETION', retryable: false });
      expect(error.message).toContain('restore-secret');
      expect(error.message).not.toContain(message);
    },
  );

  it('keeps other InvalidRequestExceptions a plain failure', () => {
    const error = toBackendError(
      Object.assign(new Error('You provided an invalid request.'), {
        name: 'InvalidRequestException',
        $metadata: { httpStatusCode: 400 },
      }),
      context,
    );
    expect(error.code).toBe('KR_BACKEND_FAILED');
  });

  it('maps an unparsable 403 (an XML AccessDenied, as moto sends) to KR_BACKEND_DENIED naming the action', () => {
    const error = toBackendError(sdkError('SyntaxError', 403), context);
    expect(error.code).toBe('KR_BACKEND_DENIED');
    expect(error.message).toContain('secretsmanager:DescribeSecret');
  });

  it('maps a refused connection to a retryable KR_BACKEND_UNAVAILABLE', () => {
    const error = toBackendError(
      Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
      context,
    );
    expect(error).toMatchObject({ code: 'KR_BACKEND_UNAVAILABLE', retryable: true });
  });

  it('says so when no region is configured anywhere', () => {
    const error = toBackendError(new Error('Region is missing'), context);
    expect(error.message).toMatch(/no AWS region/);
  });

  it('keeps the cause of calls without a secret and drops it for calls that carry one', () => {
    const original = sdkError('AccessDeniedException', 400);
    expect(toBackendError(original, context).cause).toBe(original);
    for (const action of ['PutSecretValue', 'CreateSecret', 'GetSecretValue'] as const) {
      expect(toBackendError(original, { ...context, action }).cause).toBeUndefined();
    }
  });
});

describe('aws answers moto cannot give (nock)', () => {
  const endpoint = 'http://secretsmanager.aws.test';
  const target: StoreTarget = {
    path: 'app/key',
    shape: { format: 'raw', secretField: 'apiKey', fields: [] },
  };
  let backend: Backend;

  beforeAll(() => {
    nock.disableNetConnect();
    const config = AwsBackendConfig.parse({ kind: 'aws', endpoint, region: 'eu-west-1', timeoutMs: 2_000 });
    backend = createAwsBackend('aws-main', config, {
      env: { AWS_ACCESS_KEY_ID: 'AKIDTEST', AWS_SECRET_ACCESS_KEY: 'test-secret-key' },
    });
  });
  afterEach(() => {
    // Every mock must be used by its test.
    expect(nock.pendingMocks()).toEqual([]);
    nock.cleanAll();
  });
  afterAll(async () => {
    await backend.close();
    nock.enableNetConnect();
  });

  function answer(action: string, status: number, body: unknown, times = 1): void {
    nock(endpoint)
      .post('/')
      .matchHeader('x-amz-target', `secretsmanager.${action}`)
      .times(times)
      .reply(status, typeof body === 'string' ? body : JSON.stringify(body), {
        'content-type': 'application/x-amz-json-1.1',
      });
  }

  function secretTexts(error: unknown): string {
    return `${String(error)}\n${inspect(error, { depth: 10 })}\n${JSON.stringify((error as BackendError).toFields())}`;
  }

  it('waits out throttle answers (the SDK never retries them itself), counts each, and returns the answer', async () => {
    const throttled: string[] = [];
    // A region of its own: the pause its throttle answers cause is not the other tests' (buckets are per region).
    const config = AwsBackendConfig.parse({ kind: 'aws', endpoint, region: 'eu-north-1', timeoutMs: 2_000 });
    const counted = createAwsBackend('aws-counted', config, {
      env: { AWS_ACCESS_KEY_ID: 'AKIDTEST', AWS_SECRET_ACCESS_KEY: 'test-secret-key' },
      quota: {
        observer: { throttled: (event) => throttled.push(`${event.group} ${String(event.attempt)}`) },
      },
    });
    try {
      answer('GetSecretValue', 400, { __type: 'ThrottlingException', message: 'Rate exceeded' }, 2);
      answer('GetSecretValue', 200, {
        ARN: 'arn:aws:secretsmanager:eu-west-1:1:secret:app/key-AbCdEf',
        Name: 'app/key',
        VersionId: 'v1',
        SecretString: 'sk_live_after_the_wait',
        VersionStages: ['AWSCURRENT'],
      });
      expect((await counted.readSecret(target))?.secret.reveal()).toBe('sk_live_after_the_wait');
      expect(throttled).toEqual(['read 1', 'read 2']);
    } finally {
      await counted.close();
    }
  });

  it('fails with a retryable KR_BACKEND_THROTTLED once the call has waited its budget (quotas.maxWaitMs)', async () => {
    const config = AwsBackendConfig.parse({
      kind: 'aws',
      endpoint,
      region: 'eu-central-1',
      timeoutMs: 2_000,
      quotas: { maxWaitMs: 50 },
    });
    const impatient = createAwsBackend('aws-impatient', config, {
      env: { AWS_ACCESS_KEY_ID: 'AKIDTEST', AWS_SECRET_ACCESS_KEY: 'test-secret-key' },
    });
    try {
      // The first wait after a throttle answer is at least 125 ms: past the budget, so that answer is the last.
      answer('DescribeSecret', 400, { __type: 'ThrottlingException', message: 'Rate exceeded' });
      const error: unknown = await impatient.preflight(target).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(BackendError);
      expect(error).toMatchObject({
        code: 'KR_BACKEND_THROTTLED',
        retryable: true,
        operation: 'preflight',
        status: 400,
      });
    } finally {
      await impatient.close();
    }
  });

  it('reports a 500 on the write as retryable KR_BACKEND_UNAVAILABLE', async () => {
    answer('PutSecretValue', 500, { __type: 'InternalServiceError', message: 'oops' }, 2);
    const record = {
      secret: new Secret('sk_live_nock_500_value_abcdef'),
      keyId: 'k',
      organizationId: 'o',
      rotationId: 'rot-500',
      rotatedAt: '2030-01-01T00:00:00.000Z',
    };
    const error: unknown = await backend.writeSecret(target, record).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'KR_BACKEND_UNAVAILABLE', retryable: true, operation: 'write' });
  });

  it('keeps the secret out of a write error even when the AWS message echoes it', async () => {
    const value = 'sk_live_echoed_by_aws_0123456789';
    answer('PutSecretValue', 400, {
      __type: 'AccessDeniedException',
      message: `not authorized for SecretString=${value}`,
    });
    const record = {
      secret: new Secret(value),
      keyId: 'k',
      organizationId: 'o',
      rotationId: 'rot-echo',
      rotatedAt: '2030-01-01T00:00:00.000Z',
    };
    const error: unknown = await backend.writeSecret(target, record).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'KR_BACKEND_DENIED' });
    expect((error as Error).cause).toBeUndefined();
    expect((error as Error).message).toContain('secretsmanager:PutSecretValue');
    expect(secretTexts(error)).not.toContain(value);
  });

  it('probes the write in preflight with a reused token and its own label, never AWSCURRENT', async () => {
    // nock: only a recorded request shows what the probe would do if its version had vanished.
    const current = '0a1b2c3d-0000-4000-8000-000000000001';
    answer('DescribeSecret', 200, {
      ARN: 'arn:aws:secretsmanager:eu-west-1:1:secret:app/key-AbCdEf',
      Name: 'app/key',
      VersionIdsToStages: { [current]: ['AWSCURRENT'] },
    });
    nock(endpoint)
      .post(
        '/',
        (body: { ClientRequestToken?: string; VersionStages?: string[] }) =>
          body.ClientRequestToken === current && body.VersionStages?.join() === 'KEYROLL_PREFLIGHT_WRITE',
      )
      .matchHeader('x-amz-target', 'secretsmanager.PutSecretValue')
      .reply(400, JSON.stringify({ __type: 'ResourceExistsException', message: 'token in use' }), {
        'content-type': 'application/x-amz-json-1.1',
      });
    // The stage probe only asks to remove a label the current version does not carry: never AWSCURRENT, never a move.
    nock(endpoint)
      .post(
        '/',
        (body: Record<string, unknown>) =>
          body.VersionStage === 'KEYROLL_PREFLIGHT_READ' &&
          body.RemoveFromVersionId === current &&
          !('MoveToVersionId' in body),
      )
      .matchHeader('x-amz-target', 'secretsmanager.UpdateSecretVersionStage')
      .reply(
        400,
        JSON.stringify({ __type: 'InvalidParameterException', message: 'label not on that version' }),
        { 'content-type': 'application/x-amz-json-1.1' },
      );
    answer('GetSecretValue', 400, { __type: 'ResourceNotFoundException', message: 'no such label' });
    answer('TagResource', 200, {});
    const result = await backend.preflight(target);
    expect(result.exists).toBe(true);
    expect(result.checks.join('\n')).toContain('PutSecretValue allowed');
    expect(result.checks.join('\n')).toContain('UpdateSecretVersionStage allowed');
  });

  it('meets a lock secret deleted after this process released it at the CAS: AWS refuses the put, the lock step names restore-secret', async () => {
    // moto accepts PutSecretValue on a secret scheduled for deletion; AWS refuses it.
    const config = AwsBackendConfig.parse({ kind: 'aws', endpoint, region: 'eu-west-1', timeoutMs: 2_000 });
    const own = createAwsBackend('aws-main', config, {
      env: { AWS_ACCESS_KEY_ID: 'AKIDTEST', AWS_SECRET_ACCESS_KEY: 'test-secret-key' },
    });
    const lockTarget: StoreTarget = { path: 'app/deleted-lock', shape: target.shape };
    const request = { owner: 'host/1/a', rotationId: 'rot-1', ttlMs: 60_000 };
    try {
      // Acquire (a process that never described the target describes it: missing, so the lock is
      // the companion's, and the first: one CreateSecret), release (the CAS from the version we wrote: no read).
      answer('DescribeSecret', 400, {
        __type: 'ResourceNotFoundException',
        message: "Secrets Manager can't find the specified secret.",
      });
      answer('CreateSecret', 200, {
        ARN: 'arn:aws:secretsmanager:eu-west-1:1:secret:app/deleted-lock.keyroll-lock-AbCdEf',
        Name: 'app/deleted-lock.keyroll-lock',
        VersionId: 'v-held',
      });
      answer('PutSecretValue', 200, { VersionId: 'v-released', VersionStages: ['KEYROLL_CANDIDATE'] });
      answer('UpdateSecretVersionStage', 200, {});
      const held = await own.acquireLock(lockTarget, request);
      if (!held.acquired) throw new Error('expected the lock');
      await own.releaseLock(lockTarget, held.lock);
      // The next acquire goes straight to the CAS from the released value it wrote.
      answer('PutSecretValue', 400, {
        __type: 'InvalidRequestException',
        message: "You can't perform this operation on the secret because it was marked for deletion.",
      });
      const error: unknown = await own
        .acquireLock(lockTarget, { ...request, rotationId: 'rot-2' })
        .catch((e: unknown) => e);
      expect(error).toMatchObject({
        code: 'KR_BACKEND_SCHEDULED_FOR_DELETION',
        operation: 'lock',
        path: 'app/deleted-lock.keyroll-lock',
      });
      expect((error as Error).message).toContain('restore-secret --secret-id app/deleted-lock.keyroll-lock');
    } finally {
      await own.close();
    }
  });

  it('keeps the secret out of the error for a garbled read-back answer', async () => {
    const value = 'sk_live_in_a_garbled_body_98765';
    answer('GetSecretValue', 200, `{"SecretString":"${value}","VersionId":`);
    const error: unknown = await backend.readSecret(target).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'KR_BACKEND_INVALID_RESPONSE' });
    expect((error as Error).cause).toBeUndefined();
    expect(secretTexts(error)).not.toContain(value);
  });
});
