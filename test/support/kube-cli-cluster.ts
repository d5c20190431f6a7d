// A namespace of a real cluster (test/support/kube-controllers.ts) set up as a user of the CLI
// finds it: keyroll's service account bound by the Role this checkout's chart renders for the
// consumers (helm template, applied as is), a kubeconfig file acting as that account, values in
// OpenBao for external-secrets to read, and the policy file that lists the consumers. Only the
// cluster's and OpenBao's own APIs and the chart: no module of src/, so a test built on it runs
// against any revision of keyroll whose CLI takes the same policy.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  CustomObjectsApi,
  RbacAuthorizationV1Api,
  type KubeConfig,
  type V1Role,
  type V1RoleBinding,
} from '@kubernetes/client-node';
import { request } from 'undici';
import { parseAllDocuments } from 'yaml';
import { serviceAccountCredentials } from './kube-apiserver.ts';
import { VAULT_STORE, valueDigest, type RealCluster } from './kube-controllers.ts';

const run = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;

export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

/** What the chart's `consumerAccess` takes for one namespace. */
export interface ConsumerAccess {
  externalSecrets?: string[];
  deployments?: string[];
}

export interface CliNamespace {
  namespace: string;
  /** A kubeconfig file acting as keyroll's service account (the policy's consumers.kubernetes.kubeconfig). */
  kubeconfigFile: string;
}

/** The Role and RoleBinding the chart renders for `access` in `namespace` (release `keyroll` in `releaseNamespace`). */
async function chartRbac(
  releaseNamespace: string,
  namespace: string,
  access: ConsumerAccess,
): Promise<(V1Role | V1RoleBinding)[]> {
  const { stdout: helm } = await run('sh', ['-c', '. scripts/lib/chart-tools.sh && keyroll_helm'], {
    cwd: ROOT,
    maxBuffer: 1 << 20,
  });
  const { stdout } = await run(
    helm.trim(),
    [
      'template',
      'keyroll',
      'helm/keyroll',
      '--namespace',
      releaseNamespace,
      '--kube-version',
      '1.31.0',
      '--set',
      'existingPolicyConfigMap.name=keyroll-policy',
      '--set-json',
      `consumerAccess=${JSON.stringify([{ namespace, ...access }])}`,
      '--show-only',
      'templates/consumer-rbac.yaml',
    ],
    { cwd: ROOT, maxBuffer: 1 << 22 },
  );
  return parseAllDocuments(stdout)
    .map((document) => document.toJS() as V1Role | V1RoleBinding | null)
    .filter((object): object is V1Role | V1RoleBinding => object !== null);
}

/** A fresh namespace of `real` whose objects `access` names, and keyroll's account bound to the chart's Role for them. */
export async function cliNamespace(
  real: RealCluster,
  dir: string,
  access: ConsumerAccess,
): Promise<CliNamespace> {
  const namespace = uniqueName('shop');
  const releaseNamespace = uniqueName('keyroll');
  const { kubeConfig } = await serviceAccountCredentials(real.kube, releaseNamespace, 'keyroll');
  // The namespace with its `default` service account, which the pods the ReplicaSets create run as
  // (no service-account controller runs here to make it).
  await serviceAccountCredentials(real.kube, namespace, 'default');
  const rbac = real.admin.makeApiClient(RbacAuthorizationV1Api);
  for (const object of await chartRbac(releaseNamespace, namespace, access)) {
    const objectNamespace = object.metadata?.namespace ?? namespace;
    if (object.kind === 'Role') await rbac.createNamespacedRole({ namespace: objectNamespace, body: object });
    else
      await rbac.createNamespacedRoleBinding({ namespace: objectNamespace, body: object as V1RoleBinding });
  }
  const kubeconfigFile = join(dir, `${namespace}.kubeconfig`);
  await writeFile(kubeconfigFile, kubeConfig.exportConfig(), { mode: 0o600 });
  return { namespace, kubeconfigFile };
}

/** An ExternalSecret reading apiKey of OpenBao's secret/apps/NAME through the ClusterSecretStore into the Secret NAME. */
export async function createExternalSecret(
  admin: KubeConfig,
  namespace: string,
  name: string,
  options: { version?: 'v1' | 'v1beta1'; spec?: { refreshInterval?: string; refreshPolicy?: string } } = {},
): Promise<void> {
  const version = options.version ?? 'v1';
  await admin.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: 'external-secrets.io',
    version,
    plural: 'externalsecrets',
    namespace,
    body: {
      apiVersion: `external-secrets.io/${version}`,
      kind: 'ExternalSecret',
      metadata: { name },
      spec: {
        refreshInterval: '1h',
        ...options.spec,
        secretStoreRef: { kind: 'ClusterSecretStore', name: VAULT_STORE },
        target: { name },
        data: [{ secretKey: 'apiKey', remoteRef: { key: `apps/${name}`, property: 'apiKey' } }],
      },
    },
  });
}

/** OpenBao's KV v2 at secret/apps/NAME, as the tests arrange and read it (the root token). */
export function openBaoApps(vault: { address: string; rootToken: string }) {
  const url = (name: string): string => `${vault.address}/v1/secret/data/apps/${name}`;
  return {
    /** The value from before keyroll's first rotation, so external-secrets' first sync succeeds. */
    async seed(name: string, apiKey: string): Promise<void> {
      const response = await request(url(name), {
        method: 'POST',
        headers: { 'x-vault-token': vault.rootToken, 'content-type': 'application/json' },
        body: JSON.stringify({ data: { apiKey } }),
      });
      await response.body.dump();
      if (response.statusCode !== 200)
        throw new Error(`OpenBao refused the seed of apps/${name} (HTTP ${String(response.statusCode)})`);
    },
    /** The digest of the apiKey stored there now. */
    async digest(name: string): Promise<string> {
      const response = await request(url(name), { headers: { 'x-vault-token': vault.rootToken } });
      const body = (await response.body.json()) as { data?: { data?: { apiKey?: string } } };
      const value = body.data?.data?.apiKey;
      if (value === undefined)
        throw new Error(
          `OpenBao holds no apiKey at secret/apps/${name} (HTTP ${String(response.statusCode)})`,
        );
      return valueDigest(value);
    },
  };
}

export interface PolicyKey {
  id: string;
  /** The OpenBao path under secret/ (apps/NAME). */
  path: string;
  consumers: { kind: 'externalSecret' | 'deployment'; namespace: string; name: string }[];
}

/**
 * A policy for the CLI: the emulator's API, OpenBao (token from $VAULT_TOKEN), the keys of
 * org_demo_acme with a 30-day maxAge and no schedule (due at their first run, not again the same
 * day), and how keyroll reaches the cluster and how long it waits for it.
 */
export function cliPolicy(options: {
  apiUrl: string;
  alertUrl: string;
  vaultAddress: string;
  kubeconfigFile: string;
  syncTimeout: string;
  rolloutTimeout: string;
  keys: PolicyKey[];
}): string {
  const keys = options.keys
    .map(
      (key) =>
        `  - id: ${key.id}\n    organization: org_demo_acme\n    maxAge: 30d\n    destinations: [{ backend: bao, path: ${key.path} }]\n    consumers:\n` +
        key.consumers
          .map(
            (consumer) =>
              `      - { kind: ${consumer.kind}, namespace: ${consumer.namespace}, name: ${consumer.name} }\n`,
          )
          .join(''),
    )
    .join('');
  return `version: 1
api:
  baseUrl: ${options.apiUrl}
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
backends:
  bao: { kind: vault, address: "${options.vaultAddress}", mount: secret, timeoutMs: 10000, auth: { method: token, token: env:VAULT_TOKEN } }
alerts:
  sinks:
    hook: { kind: webhook, url: "${options.alertUrl}" }
consumers:
  kubernetes: { kubeconfig: ${options.kubeconfigFile} }
  syncTimeout: ${options.syncTimeout}
  rolloutTimeout: ${options.rolloutTimeout}
keys:
${keys}`;
}
