// The shipped IAM policy (config/iam-policy.json) against moto with IAM enforcement on, plus a
// static check of what moto cannot evaluate. What moto checks, read from its source
// (moto/core/responses.py, moto/iam/access_control.py):
// - It verifies the SigV4 signature against the IAM user's key and evaluates the user's
//   policies for the called action (`secretsmanager:PutSecretValue`, ...).
// - For Secrets Manager it evaluates every request against the resource "*" (moto has no
//   resource resolver for the service), so a statement whose Resource is an ARN pattern never
//   matches, and it supplies no condition keys (aws:RequestTag, aws:TagKeys, kms:ViaService).
// So the live tests run the policy with each Allow statement widened to Resource "*" without
// conditions: they prove the ACTION set (sufficient, and each action necessary). Resources and
// conditions are evaluated statically below for every call the backend makes, lock companions
// included, for each AWS destination of the paired example config/aws-policy.yaml.
// Enforcement is switched on at run time through moto's /moto-api/reset-auth (the runtime form
// of INITIAL_NO_AUTH_ACTION_COUNT) once the users exist, and switched off afterwards.
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { AwsBackendConfig } from '../../src/backends/aws/config.ts';
import { createAwsBackend } from '../../src/backends/aws/index.ts';
import { LOCK_SUFFIX } from '../../src/backends/aws/lock/companion.ts';
import {
  MANAGED_BY_VALUE,
  TAG_INTENT,
  TAG_LAST_FAILURE,
  TAG_LAST_KEY_ID,
  TAG_LAST_PROBE,
  TAG_LAST_ROTATED_AT,
  TAG_LAST_ROTATION_ID,
  TAG_LAST_VERSION,
  TAG_MANAGED_BY,
  TAG_LOCK_RELEASED,
  TAG_PREFLIGHT,
} from '../../src/backends/aws/record-tags.ts';
import { BackendError } from '../../src/backends/errors.ts';
import type { Backend, StoreTarget } from '../../src/backends/types.ts';
import { loadPolicy } from '../../src/policy/load.ts';
import { createTestClock, makeRecord, type TestClock } from '../backends/contract.ts';
import { describeWithMoto } from '../support/moto.ts';
import type { MotoServer } from './servers.ts';

const POLICY_FILE = new URL('../../config/iam-policy.json', import.meta.url);
/** The example keyroll policy the IAM policy is paired with. */
const EXAMPLE_POLICY_FILE = new URL('../../config/aws-policy.yaml', import.meta.url);

/** Every Secrets Manager action the backend calls (src/backends/aws/errors.ts AwsAction). */
const USED_ACTIONS = [
  'DescribeSecret',
  'GetSecretValue',
  'ListSecretVersionIds',
  'PutSecretValue',
  'CreateSecret',
  'UpdateSecretVersionStage',
  'TagResource',
];

interface Statement {
  Sid?: string;
  Effect: 'Allow' | 'Deny';
  Action?: string | string[];
  Resource?: string | string[];
  Condition?: Record<string, Record<string, string | string[]>>;
}
interface PolicyDocument {
  Version: string;
  Statement: Statement[];
}

const list = (value: string | string[] | undefined): string[] =>
  value === undefined ? [] : Array.isArray(value) ? value : [value];

/** IAM wildcard matching (`*` any run, `?` one character). */
function iamMatch(pattern: string, value: string, ignoreCase = false): boolean {
  const source = `^${pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.')}$`;
  return new RegExp(source, ignoreCase ? 'i' : '').test(value);
}

function actionAllowed(statement: Statement, action: string): boolean {
  return list(statement.Action).some((pattern) => iamMatch(pattern, action, true));
}

/** The request context of one call: condition keys (lower case) and their values. */
type RequestContext = Record<string, string[]>;

/** The condition operators the shipped policy uses; anything else fails the test loudly. */
function conditionsHold(condition: Statement['Condition'], context: RequestContext): boolean {
  for (const [operator, entries] of Object.entries(condition ?? {})) {
    for (const [key, expected] of Object.entries(entries)) {
      const patterns = list(expected);
      const actual = context[key.toLowerCase()];
      const like = (v: string): boolean => patterns.some((p) => iamMatch(p, v));
      switch (operator) {
        case 'StringEquals':
          if (!actual?.some((v) => patterns.includes(v))) return false;
          break;
        case 'StringLike':
          if (!actual?.some(like)) return false;
          break;
        case 'ForAllValues:StringLike':
          if (actual !== undefined && !actual.every(like)) return false;
          break;
        case 'ForAllValues:StringEquals':
          if (actual !== undefined && !actual.every((v) => patterns.includes(v))) return false;
          break;
        default:
          throw new Error(`the test does not evaluate condition operator ${operator}`);
      }
    }
  }
  return true;
}

/** IAM's verdict for one call: an explicit Deny wins, else some Allow must match. */
function allowed(
  policy: PolicyDocument,
  action: string,
  resource: string,
  context: RequestContext = {},
): boolean {
  const matching = policy.Statement.filter(
    (s) =>
      actionAllowed(s, action) &&
      list(s.Resource).some((r) => iamMatch(r, resource)) &&
      conditionsHold(s.Condition, context),
  );
  return !matching.some((s) => s.Effect === 'Deny') && matching.some((s) => s.Effect === 'Allow');
}

interface Call {
  action: string;
  resource: string;
  context?: RequestContext;
}

/** Every call the backend makes for one destination (see src/backends/aws/*.ts). */
function callsFor(config: AwsBackendConfig, region: string, account: string, path: string): Call[] {
  const arn = (name: string): string => `arn:aws:secretsmanager:${region}:${account}:secret:${name}-AbCdEf`;
  const target = arn(path);
  const lock = arn(`${path}${LOCK_SUFFIX}`);
  const configured = Object.keys(config.tags);
  const record = [TAG_LAST_ROTATED_AT, TAG_LAST_ROTATION_ID, TAG_LAST_VERSION, TAG_LAST_KEY_ID];
  // The finish step records the rotation, overwrites its marker and gives the lock back in one
  // TagResource; a drift probe's record gives the lock back too; a marker is cleared by overwriting.
  const bookkeeping = [
    [TAG_INTENT],
    record,
    [...record, TAG_INTENT, TAG_LOCK_RELEASED],
    [TAG_LAST_FAILURE],
    [TAG_LAST_PROBE, TAG_LOCK_RELEASED],
    [TAG_PREFLIGHT],
  ];
  const creating = (resource: string, extraKeys: string[]): Call[] => {
    const keys = [...configured, TAG_MANAGED_BY, ...extraKeys];
    const context: RequestContext = {
      'aws:tagkeys': keys,
      [`aws:requesttag/${TAG_MANAGED_BY}`]: [MANAGED_BY_VALUE],
    };
    for (const [key, value] of Object.entries(config.tags))
      context[`aws:requesttag/${key}`.toLowerCase()] = [value];
    // CreateSecret with Tags is also authorized as TagResource on the new secret.
    return [
      { action: 'secretsmanager:CreateSecret', resource, context },
      { action: 'secretsmanager:TagResource', resource, context },
    ];
  };
  const calls: Call[] = [
    // UpdateSecretVersionStage on the target: the fenced write's move of AWSCURRENT and its preflight probe.
    ...[
      'DescribeSecret',
      'GetSecretValue',
      'ListSecretVersionIds',
      'PutSecretValue',
      'UpdateSecretVersionStage',
    ].map((a) => ({ action: `secretsmanager:${a}`, resource: target })),
    ...creating(target, [...new Set(bookkeeping.flat())]),
    ...bookkeeping.map((keys) => ({
      action: 'secretsmanager:TagResource',
      resource: target,
      context: { 'aws:tagkeys': keys },
    })),
    ...creating(lock, []),
    ...['GetSecretValue', 'PutSecretValue', 'UpdateSecretVersionStage'].map((a) => ({
      action: `secretsmanager:${a}`,
      resource: lock,
    })),
  ];
  if (config.kmsKeyId !== undefined) {
    // Secrets Manager encrypts and decrypts with the key on keyroll's behalf.
    const via = { 'kms:viaservice': [`secretsmanager.${region}.amazonaws.com`] };
    calls.push(
      { action: 'kms:GenerateDataKey', resource: config.kmsKeyId, context: via },
      { action: 'kms:Decrypt', resource: config.kmsKeyId, context: via },
    );
  }
  return calls;
}

/** The policy as moto can evaluate it: Allow statements with Resource "*" and no conditions. */
function widened(policy: PolicyDocument, without?: string): PolicyDocument {
  const statements = policy.Statement.filter((s) => s.Effect === 'Allow').map((s) => ({
    Effect: 'Allow' as const,
    Action: list(s.Action).filter(
      (a) => without === undefined || a.toLowerCase() !== `secretsmanager:${without}`.toLowerCase(),
    ),
    Resource: '*',
  }));
  return { Version: '2012-10-17', Statement: statements.filter((s) => s.Action.length > 0) };
}

/** Calls moto's IAM query API. Unsigned: only valid before enforcement is switched on. */
async function iam(server: MotoServer, params: Record<string, string>): Promise<string> {
  const response = await fetch(`${server.endpoint}/`, {
    method: 'POST',
    body: new URLSearchParams({ Version: '2010-05-08', ...params }).toString(),
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      // moto routes by the credential scope's service name; the signature is not checked yet.
      authorization: `AWS4-HMAC-SHA256 Credential=${server.accessKeyId}/20300101/${server.region}/iam/aws4_request, SignedHeaders=host, Signature=0`,
    },
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`moto IAM ${params.Action ?? ''} failed: ${String(response.status)}`);
  return text;
}

async function createUser(
  server: MotoServer,
  name: string,
  policy: PolicyDocument,
): Promise<NodeJS.ProcessEnv> {
  await iam(server, { Action: 'CreateUser', UserName: name });
  await iam(server, {
    Action: 'PutUserPolicy',
    UserName: name,
    PolicyName: 'keyroll',
    PolicyDocument: JSON.stringify(policy),
  });
  const keys = await iam(server, { Action: 'CreateAccessKey', UserName: name });
  const id = /<AccessKeyId>([^<]+)<\/AccessKeyId>/.exec(keys)?.[1];
  const secret = /<SecretAccessKey>([^<]+)<\/SecretAccessKey>/.exec(keys)?.[1];
  if (id === undefined || secret === undefined) throw new Error('moto CreateAccessKey answered without keys');
  return { AWS_ACCESS_KEY_ID: id, AWS_SECRET_ACCESS_KEY: secret, AWS_REGION: server.region };
}

async function enforceIam(server: MotoServer, on: boolean): Promise<void> {
  // 0: every request from now on is authenticated; inf: none is (moto's default).
  const response = await fetch(`${server.endpoint}/moto-api/reset-auth`, {
    method: 'POST',
    body: on ? '0' : 'inf',
  });
  if (!response.ok) throw new Error(`moto reset-auth failed: ${String(response.status)}`);
}

/** Everything keyroll does to one destination over two rotations (fenced writes, a refresh), including a stale lock takeover. */
async function rotationCycle(backend: Backend, target: StoreTarget, clock: TestClock): Promise<void> {
  const owner = { owner: 'iam-test', ttlMs: 60_000 };
  expect((await backend.preflight(target)).exists).toBe(false);
  const first = makeRecord({ rotationId: randomUUID() });
  const lock = await backend.acquireLock(target, { ...owner, rotationId: first.rotationId });
  if (!lock.acquired) throw new Error('expected the lock');
  await backend.setIntent(target, {
    rotationId: first.rotationId,
    keyId: first.keyId,
    owner: 'iam-test',
    startedAt: first.rotatedAt,
  });
  await backend.readState(target);
  const written = await backend.writeSecret(target, first, { lock: lock.lock });
  expect((await backend.readSecret(target))?.secret.equals(first.secret)).toBe(true);
  await backend.recordRotation(
    target,
    {
      rotationId: first.rotationId,
      rotatedAt: first.rotatedAt,
      version: written.version,
      keyId: first.keyId,
    },
    { clearIntent: true },
  );
  await backend.clearIntent(target, first.rotationId);
  await backend.releaseLock(target, lock.lock);

  // As the rotation engine asks it: the lock follows, so preflight counts the versions (ListSecretVersionIds).
  expect((await backend.preflight(target, 'rotation')).exists).toBe(true);
  const second = makeRecord({ rotationId: randomUUID() });
  const again = await backend.acquireLock(target, { ...owner, rotationId: second.rotationId, ttlMs: 1_000 });
  if (!again.acquired) throw new Error('expected the lock');
  // The fenced write of an existing secret: a durable put, then the move of AWSCURRENT.
  await backend.readState(target);
  await backend.writeSecret(target, second, { lock: again.lock });
  expect((await backend.writeSecret(target, second, { lock: again.lock })).alreadyApplied).toBe(true);
  expect(await backend.refreshLock(target, again.lock, 1_000)).toBeDefined();
  await backend.recordFailure(target, {
    rotationId: second.rotationId,
    step: 'verify',
    errorCode: 'KR_TEST',
    at: second.rotatedAt,
  });
  // A two-slot entry's drift probe of its standby value (AWSPREVIOUS), and its record.
  expect((await backend.readPrevious?.(target))?.secret.equals(first.secret)).toBe(true);
  await backend.recordProbe(target, { at: second.rotatedAt, result: 'works' });
  clock.advance(2_000);
  const takeover = await backend.acquireLock(target, {
    ...owner,
    owner: 'iam-test-2',
    rotationId: randomUUID(),
  });
  expect(takeover).toMatchObject({ acquired: true, lock: { tookOver: true } });
  expect((await backend.readState(target)).lastRotationId).toBe(first.rotationId);
}

describeWithMoto('shipped IAM policy (config/iam-policy.json)', ({ server }) => {
  const run = randomUUID().slice(0, 8);
  let policy: PolicyDocument;
  const users = new Map<string, NodeJS.ProcessEnv>();
  let n = 0;

  function backendFor(user: string, clock: TestClock): Backend {
    const env = users.get(user);
    if (env === undefined) throw new Error(`no user ${user}`);
    const config = AwsBackendConfig.parse({ kind: 'aws', endpoint: server.endpoint, createIfMissing: true });
    return createAwsBackend(`aws-${user}`, config, { now: clock.now, env });
  }
  function target(): StoreTarget {
    n += 1;
    return {
      path: `keyroll/iam-${run}/key-${String(n)}`,
      shape: { format: 'raw', secretField: 'apiKey', fields: [] },
    };
  }

  beforeAll(async () => {
    policy = JSON.parse(await readFile(POLICY_FILE, 'utf8')) as PolicyDocument;
    users.set('least', await createUser(server, `keyroll-least-${run}`, widened(policy)));
    for (const action of USED_ACTIONS)
      users.set(
        `without-${action}`,
        await createUser(server, `keyroll-no-${action}-${run}`, widened(policy, action)),
      );
    await enforceIam(server, true);
  });
  afterAll(async () => {
    await enforceIam(server, false);
  });

  it('grants every Secrets Manager action the backend calls, and no other', () => {
    const granted = policy.Statement.filter((s) => s.Effect === 'Allow')
      .flatMap((s) => list(s.Action))
      .filter((a) => a.toLowerCase().startsWith('secretsmanager:'));
    for (const action of USED_ACTIONS)
      expect(
        granted.some((a) => iamMatch(a, `secretsmanager:${action}`, true)),
        action,
      ).toBe(true);
    expect(
      granted.filter((a) => !USED_ACTIONS.some((used) => iamMatch(a, `secretsmanager:${used}`, true))),
    ).toEqual([]);
    expect(granted.filter((a) => a.includes('*'))).toEqual([]);
  });

  it("asks KMS only for what Secrets Manager does on keyroll's behalf (GenerateDataKey, Decrypt), never Encrypt: keyroll never calls UpdateSecret with a new KmsKeyId", () => {
    const kms = policy.Statement.filter((s) => s.Effect === 'Allow')
      .flatMap((s) => list(s.Action))
      .filter((a) => a.toLowerCase().startsWith('kms:'));
    expect(new Set(kms)).toEqual(new Set(['kms:GenerateDataKey', 'kms:Decrypt']));
  });

  it('allows every call, conditions and lock companions included, for each AWS destination of config/aws-policy.yaml', async () => {
    // Static, because moto cannot evaluate resources or conditions for Secrets Manager.
    const example = await loadPolicy(fileURLToPath(EXAMPLE_POLICY_FILE));
    let checked = 0;
    for (const key of example.keys) {
      for (const destination of [...key.destinations, ...key.fallbacks]) {
        const config = example.backends[destination.backend];
        if (config?.kind !== 'aws') continue;
        const region = config.region ?? 'us-east-1';
        const account = /^arn:[^:]+:kms:[^:]*:(\d{12}):/.exec(config.kmsKeyId ?? '')?.[1] ?? '123456789012';
        for (const call of callsFor(config, region, account, destination.target.path)) {
          expect(
            allowed(policy, call.action, call.resource, call.context),
            `${call.action} on ${call.resource}`,
          ).toBe(true);
          checked += 1;
        }
      }
    }
    expect(checked).toBeGreaterThan(0);
  });

  it('is narrower than "anything keyroll might do": other secrets, other tags and foreign tag values are refused', () => {
    const foreign = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:payments/db-password-AbCdEf';
    const ours = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:keyroll/prod/checkout/api-key-AbCdEf';
    expect(allowed(policy, 'secretsmanager:GetSecretValue', foreign)).toBe(false);
    expect(allowed(policy, 'secretsmanager:PutSecretValue', foreign)).toBe(false);
    expect(
      allowed(policy, 'secretsmanager:CreateSecret', ours, {
        'aws:requesttag/managed-by': ['terraform'],
        'aws:tagkeys': ['managed-by'],
      }),
    ).toBe(false);
    expect(allowed(policy, 'secretsmanager:UntagResource', ours, { 'aws:tagkeys': ['managed-by'] })).toBe(
      false,
    );
    expect(allowed(policy, 'secretsmanager:DeleteSecret', ours)).toBe(false);
  });

  it('is enforced by moto: unknown credentials are denied', async () => {
    users.set('nobody', {
      AWS_ACCESS_KEY_ID: 'AKIAIOSFODNN7EXAMPLE',
      AWS_SECRET_ACCESS_KEY: 'not-a-real-key',
      AWS_REGION: server.region,
    });
    const backend = backendFor('nobody', createTestClock());
    try {
      const error: unknown = await backend.preflight(target()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(BackendError);
      expect((error as BackendError).code).toBe('KR_BACKEND_DENIED');
    } finally {
      await backend.close();
    }
  });

  it('suffices for two full rotations and a stale lock takeover', async () => {
    const clock = createTestClock();
    const backend = backendFor('least', clock);
    try {
      await rotationCycle(backend, target(), clock);
    } finally {
      await backend.close();
    }
  });

  it('preflight of an existing secret is denied without UpdateSecretVersionStage on it, before any roll (the fenced write moves AWSCURRENT)', async () => {
    const clock = createTestClock();
    const writer = backendFor('least', clock);
    const denied = backendFor('without-UpdateSecretVersionStage', clock);
    const t = target();
    try {
      await writer.writeSecret(t, makeRecord({ rotationId: randomUUID() }));
      const error: unknown = await denied.preflight(t).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'KR_BACKEND_DENIED', operation: 'preflight' });
      expect((error as BackendError).message).toContain('secretsmanager:UpdateSecretVersionStage');
    } finally {
      await Promise.all([writer.close(), denied.close()]);
    }
  });

  it.each(USED_ACTIONS)(
    'without secretsmanager:%s the same work is denied, naming that action',
    async (action) => {
      const clock = createTestClock();
      const backend = backendFor(`without-${action}`, clock);
      try {
        const error: unknown = await rotationCycle(backend, target(), clock).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(BackendError);
        expect(error).toMatchObject({ code: 'KR_BACKEND_DENIED' });
        expect((error as BackendError).message).toContain(`secretsmanager:${action}`);
      } finally {
        await backend.close();
      }
    },
  );
});
