// The secret stores a fault case writes to: a file directory, or the real OpenBao and moto servers
// of test/integration/global-setup.ts behind a fault proxy (test/faults/proxy.ts). keyroll talks
// to a real server only through the proxy, with its own narrowed credential; the test looks behind
// keyroll's back through a direct, full-rights backend.
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  DescribeSecretCommand,
  GetSecretValueCommand,
  ListSecretVersionIdsCommand,
  SecretsManagerClient,
} from '@aws-sdk/client-secrets-manager';
import { LOCK_STAGE } from '../../src/backends/aws/lock/target.ts';
import { parseLockValue } from '../../src/backends/aws/lock/value.ts';
import type { BackendConfig } from '../../src/backends/config.ts';
import { createBackend } from '../../src/backends/registry.ts';
import type { Backend, StoreTarget } from '../../src/backends/types.ts';
import { motoEnv } from '../integration/aws-fixtures.ts';
import { motoServer, vaultServer, type MotoServer } from '../integration/servers.ts';
import { vaultAdmin } from '../integration/vault-admin.ts';
import { startAwsQuotaProxy, type AwsQuotaProxy } from '../support/aws-quota-proxy.ts';
import { startFaultProxy, type FaultProxy } from './proxy.ts';

export type StoreKind = 'file' | 'vault' | 'aws';

/** Backend timeout for keyroll's side: a silent server fails a call after this long. */
export const BACKEND_TIMEOUT_MS = 1_000;

export interface StoreSide {
  kind: StoreKind;
  /** The backend config keyroll uses (for real servers: through the proxy). */
  config: BackendConfig;
  /** Environment keyroll needs for it (the Vault token, AWS keys). */
  env: Record<string, string>;
  proxy?: FaultProxy;
  /** AWS only, when asked for: AWS's request quotas enforced in front of moto (keyroll → quotas → fault proxy → moto). */
  quota?: AwsQuotaProxy;
  /** Full rights, straight to the server: seeding and reading behind keyroll's back. */
  direct: Backend;
  targetPath(keyId: string): string;
  /** Narrows keyroll's own credential to read-only (permission denied on every write), and back. */
  denyWrites?: () => Promise<void>;
  allowWrites?: () => Promise<void>;
  /** Another writer changes the entry (a check-and-set conflict for keyroll's next write). */
  writeFromOutside?: (target: StoreTarget) => Promise<void>;
  /** keyroll's bookkeeping beside the value (metadata, tags, sidecars), as text for the leak scan. */
  bookkeeping(target: StoreTarget): Promise<string>;
  /** How many versions of the value exist (invariant 8: a retried write adds none); undefined for files. */
  versions?: (target: StoreTarget) => Promise<number>;
  close(): Promise<void>;
}

const run = randomUUID().slice(0, 8);

async function readOptional(path: string): Promise<string> {
  return readFile(path, 'latin1').catch(() => '');
}

export async function startFileStore(dir: string): Promise<StoreSide> {
  const config: BackendConfig = { kind: 'file', directory: join(dir, 'secrets') };
  const direct = await createBackend('direct', config);
  return {
    kind: 'file',
    config,
    env: {},
    direct,
    targetPath: (keyId) => `${keyId}.json`,
    bookkeeping: async (target) =>
      (await readOptional(join(dir, 'secrets', `${target.path}.keyroll.json`))) +
      (await readOptional(join(dir, 'secrets', `${target.path}.keyroll.lock`))),
    close: () => direct.close(),
  };
}

const vaultPolicy = (capabilities: string): string => `
path "secret/data/apps/*" { capabilities = [${capabilities}] }
path "secret/metadata/apps/*" { capabilities = [${capabilities}] }
path "sys/capabilities-self" { capabilities = ["update"] }
path "auth/token/lookup-self" { capabilities = ["read"] }
path "auth/token/renew-self" { capabilities = ["update"] }
`;
const VAULT_WRITE = '"create", "read", "update"';
const VAULT_READ = '"read"';

/** undefined when no OpenBao server is available (tests skip outside CI; servers.ts fails under CI). */
export async function startVaultStore(): Promise<StoreSide | undefined> {
  const server = vaultServer();
  if (!server) return undefined;
  const admin = vaultAdmin(server);
  const policyName = `keyroll-faults-${run}`;
  await admin.putPolicy(policyName, vaultPolicy(VAULT_WRITE));
  const token = await admin.createToken({ policies: [policyName], noDefaultPolicy: true });
  const proxy = await startFaultProxy(server.address);
  const config: BackendConfig = {
    kind: 'vault',
    address: proxy.url,
    mount: 'secret',
    timeoutMs: BACKEND_TIMEOUT_MS,
    auth: { method: 'token', token: 'env:KEYROLL_FAULTS_VAULT_TOKEN' },
  };
  const direct = await createBackend(
    'direct',
    { ...config, address: server.address, timeoutMs: 10_000 },
    { env: { KEYROLL_FAULTS_VAULT_TOKEN: server.rootToken } },
  );
  return {
    kind: 'vault',
    config,
    env: { KEYROLL_FAULTS_VAULT_TOKEN: token },
    proxy,
    direct,
    targetPath: (keyId) => `apps/faults-${run}/${keyId}`,
    denyWrites: () => admin.putPolicy(policyName, vaultPolicy(VAULT_READ)),
    allowWrites: () => admin.putPolicy(policyName, vaultPolicy(VAULT_WRITE)),
    writeFromOutside: async (target) => {
      await admin.must('POST', `secret/data/${target.path}`, { data: { apiKey: 'written-by-another-tool' } });
    },
    bookkeeping: async (target) => {
      const metadata = await admin.call('GET', `secret/metadata/${target.path}`);
      const lock = await admin.call('GET', `secret/data/${target.path}.keyroll-lock`);
      return JSON.stringify([metadata.body, lock.body]);
    },
    versions: async (target) => {
      const metadata = await admin.must('GET', `secret/metadata/${target.path}`);
      return Object.keys(
        (metadata.data as { versions?: Record<string, unknown> } | undefined)?.versions ?? {},
      ).length;
    },
    close: async () => {
      await direct.close();
      await proxy.close();
    },
  };
}

// ── moto with IAM enforcement switched on for "permission denied" ─────────────────────

const SM_ACTIONS = [
  'DescribeSecret',
  'GetSecretValue',
  'ListSecretVersionIds',
  'PutSecretValue',
  'CreateSecret',
  'UpdateSecretVersionStage',
  'TagResource',
];
const SM_READ = ['DescribeSecret', 'GetSecretValue', 'ListSecretVersionIds'];

function iamPolicy(actions: readonly string[]): string {
  return JSON.stringify({
    Version: '2012-10-17',
    Statement: [{ Effect: 'Allow', Action: actions.map((a) => `secretsmanager:${a}`), Resource: '*' }],
  });
}

/** moto's IAM query API, unsigned: only valid while enforcement is off. */
async function iam(server: MotoServer, params: Record<string, string>): Promise<string> {
  const response = await fetch(`${server.endpoint}/`, {
    method: 'POST',
    body: new URLSearchParams({ Version: '2010-05-08', ...params }).toString(),
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `AWS4-HMAC-SHA256 Credential=${server.accessKeyId}/20300101/${server.region}/iam/aws4_request, SignedHeaders=host, Signature=0`,
    },
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`moto IAM ${params.Action ?? ''} failed: ${String(response.status)}`);
  return text;
}

async function enforceIam(server: MotoServer, on: boolean): Promise<void> {
  // 0: every request from now on is authenticated and authorized; inf: none is (moto's default).
  const response = await fetch(`${server.endpoint}/moto-api/reset-auth`, {
    method: 'POST',
    body: on ? '0' : 'inf',
  });
  if (!response.ok) throw new Error(`moto reset-auth failed: ${String(response.status)}`);
}

export interface StoreOptions {
  /** AWS: put the quota proxy (test/support/aws-quota-proxy.ts) in front of the fault proxy. */
  awsQuotas?: boolean;
}

export async function startAwsStore(options: StoreOptions = {}): Promise<StoreSide | undefined> {
  const server = motoServer();
  if (!server) return undefined;
  const user = `keyroll-faults-${run}`;
  await iam(server, { Action: 'CreateUser', UserName: user });
  const putPolicy = (actions: readonly string[]): Promise<string> =>
    iam(server, {
      Action: 'PutUserPolicy',
      UserName: user,
      PolicyName: 'keyroll',
      PolicyDocument: iamPolicy(actions),
    });
  await putPolicy(SM_ACTIONS);
  const keys = await iam(server, { Action: 'CreateAccessKey', UserName: user });
  const accessKeyId = /<AccessKeyId>([^<]+)<\/AccessKeyId>/.exec(keys)?.[1];
  const secretAccessKey = /<SecretAccessKey>([^<]+)<\/SecretAccessKey>/.exec(keys)?.[1];
  if (accessKeyId === undefined || secretAccessKey === undefined)
    throw new Error('moto CreateAccessKey answered without keys');
  const proxy = await startFaultProxy(server.endpoint);
  const sdk = new SecretsManagerClient({
    endpoint: server.endpoint,
    region: server.region,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
  });
  // The version quota as AWS counts it, on moto's own versions: created in the last 24 h, or labelled.
  const countVersions = async (secretId: string): Promise<number> => {
    const listed = await sdk.send(
      new ListSecretVersionIdsCommand({ SecretId: secretId, IncludeDeprecated: true, MaxResults: 100 }),
    );
    const since = Date.now() - 24 * 3600_000;
    return (listed.Versions ?? []).filter(
      (v) => (v.VersionStages ?? []).length > 0 || (v.CreatedDate?.getTime() ?? 0) > since,
    ).length;
  };
  const quota =
    options.awsQuotas === true ? await startAwsQuotaProxy({ upstream: proxy.url, countVersions }) : undefined;
  const config: BackendConfig = {
    kind: 'aws',
    endpoint: quota?.url ?? proxy.url,
    region: server.region,
    createIfMissing: true,
    tags: {},
    timeoutMs: BACKEND_TIMEOUT_MS,
  };
  const direct = await createBackend(
    'direct',
    { ...config, endpoint: server.endpoint, timeoutMs: 10_000 },
    { env: motoEnv(server) },
  );
  let enforced = false;
  return {
    kind: 'aws',
    config,
    env: {
      AWS_ACCESS_KEY_ID: accessKeyId,
      AWS_SECRET_ACCESS_KEY: secretAccessKey,
      AWS_REGION: server.region,
    },
    proxy,
    ...(quota ? { quota } : {}),
    direct,
    targetPath: (keyId) => `keyroll-faults/${run}/${keyId}`,
    denyWrites: async () => {
      await putPolicy(SM_READ);
      await enforceIam(server, true);
      enforced = true;
    },
    allowWrites: async () => {
      await enforceIam(server, false);
      enforced = false;
      await putPolicy(SM_ACTIONS);
    },
    bookkeeping: async (target) => {
      const described = await Promise.all(
        [target.path, `${target.path}.keyroll-lock`].map((id) =>
          sdk
            .send(new DescribeSecretCommand({ SecretId: id }))
            .catch((error: unknown) => ({ missing: (error as Error).name })),
        ),
      );
      // The key lock on the secret itself (a version labelled KEYROLL_LOCK): bookkeeping too.
      const lock = await sdk
        .send(new GetSecretValueCommand({ SecretId: target.path, VersionStage: LOCK_STAGE }))
        .then(
          (answer) => answer.SecretString,
          (error: unknown) => (error as Error).name,
        );
      return JSON.stringify([...described, lock]);
    },
    versions: async (target) => {
      // Versions of the value: the key lock's own versions on the secret (lock/target.ts) do not count.
      const listed = await sdk.send(
        new ListSecretVersionIdsCommand({ SecretId: target.path, IncludeDeprecated: true }),
      );
      const values = await Promise.all(
        (listed.Versions ?? []).map(
          async (version) =>
            (
              await sdk.send(
                new GetSecretValueCommand({ SecretId: target.path, VersionId: version.VersionId }),
              )
            ).SecretString,
        ),
      );
      return values.filter((value) => parseLockValue(value) === undefined).length;
    },
    close: async () => {
      // Never leave moto enforcing IAM for the next test file.
      if (enforced) await enforceIam(server, false);
      sdk.destroy();
      await direct.close();
      await quota?.close();
      await proxy.close();
    },
  };
}

export async function startStore(
  kind: StoreKind,
  dir: string,
  options: StoreOptions = {},
): Promise<StoreSide | undefined> {
  if (kind === 'file') return startFileStore(dir);
  if (kind === 'vault') return startVaultStore();
  return startAwsStore(options);
}
