// What the tests against the real controllers share (test/support/kube-controllers.ts starts
// them): a consumer namespace on the cluster's own API server with keyroll bound by the chart's
// Role (test/support/consumer-cluster.ts), an ExternalSecret reading OpenBao through the ClusterSecretStore `vault`, a
// Deployment whose pods take the synced Secret in their environment, the stand-in kubelet that
// starts those pods, and keyroll's bench storing into that OpenBao.
import { AppsV1Api, CoreV1Api, CustomObjectsApi, type V1ReplicaSet } from '@kubernetes/client-node';
import { request } from 'undici';
import { VaultBackendConfig } from '../../../src/backends/vault/config.ts';
import type { ConsumerSettings } from '../../../src/policy/consumers.ts';
import {
  StandInKubelet,
  VAULT_STORE,
  valueDigest,
  type RealCluster,
} from '../../support/kube-controllers.ts';
import { JSON_SHAPE } from '../../rotation/harness.ts';
import type { VaultServer } from '../servers.ts';
import { consumerNamespace, uniqueName, type ConsumerNamespace } from '../../support/consumer-cluster.ts';
import { consumerBench, type ConsumerBench } from '../../support/consumer-bench.ts';

const TOKEN_ENV = 'KR_REAL_CONTROLLERS_VAULT_TOKEN';
export const REPLICAS = 2;

export interface RealConsumers {
  cluster: ConsumerNamespace;
  kubelet: StandInKubelet;
  bench: ConsumerBench;
  keyId: string;
  /** The ExternalSecret, its Secret (same name) and the OpenBao path apps/NAME. */
  secretName: string;
  deployment: string;
  /** The digest of the value OpenBao holds now (keyroll's last store). */
  storedDigest(): Promise<string>;
  /** The digest of the Kubernetes Secret's apiKey, or undefined while it does not exist. */
  secretDigest(): Promise<string | undefined>;
  replicaSets(): Promise<V1ReplicaSet[]>;
  close(): Promise<void>;
}

/**
 * A namespace of `real` with an ExternalSecret of `apiVersion` and a Deployment on its Secret, both
 * consumers of one key stored in `vault` at apps/NAME. The Deployment exists before any value
 * does: its first pods wait (as on a kubelet) until the first sync made the Secret.
 */
export async function realConsumers(
  real: RealCluster,
  vault: VaultServer,
  dir: string,
  options: {
    apiVersion?: 'v1' | 'v1beta1';
    settings?: Partial<ConsumerSettings>;
    deploymentAnnotations?: Record<string, string>;
  } = {},
): Promise<RealConsumers> {
  const secretName = uniqueName('billing-api-key');
  const deployment = uniqueName('billing');
  const keyId = uniqueName('key_demo_billing').replace(/-/g, '_');
  const cluster = await consumerNamespace(real.kube, dir, (namespace) => [
    { namespace, externalSecrets: [secretName], deployments: [deployment] },
  ]);
  const objects = real.admin.makeApiClient(CustomObjectsApi);
  const apps = real.admin.makeApiClient(AppsV1Api);
  const apiVersion = options.apiVersion ?? 'v1';
  await objects.createNamespacedCustomObject({
    group: 'external-secrets.io',
    version: apiVersion,
    plural: 'externalsecrets',
    namespace: cluster.namespace,
    body: {
      apiVersion: `external-secrets.io/${apiVersion}`,
      kind: 'ExternalSecret',
      metadata: { name: secretName },
      // An hour: every sync the tests see within it is a force-sync's.
      spec: {
        refreshInterval: '1h',
        secretStoreRef: { kind: 'ClusterSecretStore', name: VAULT_STORE },
        target: { name: secretName },
        data: [{ secretKey: 'apiKey', remoteRef: { key: `apps/${secretName}`, property: 'apiKey' } }],
      },
    },
  });
  await apps.createNamespacedDeployment({
    namespace: cluster.namespace,
    body: {
      metadata: {
        name: deployment,
        ...(options.deploymentAnnotations === undefined
          ? {}
          : { annotations: options.deploymentAnnotations }),
      },
      spec: {
        replicas: REPLICAS,
        selector: { matchLabels: { app: deployment } },
        template: {
          metadata: { labels: { app: deployment } },
          spec: {
            containers: [
              {
                name: 'app',
                image: 'registry.invalid/billing:1',
                env: [{ name: 'API_KEY', valueFrom: { secretKeyRef: { name: secretName, key: 'apiKey' } } }],
              },
            ],
          },
        },
      },
    },
  });
  const kubelet = new StandInKubelet(real.admin, cluster.namespace);
  const bench = await consumerBench(
    cluster.client,
    [
      {
        id: keyId,
        consumers: [
          { kind: 'externalSecret', namespace: cluster.namespace, name: secretName },
          { kind: 'deployment', namespace: cluster.namespace, name: deployment },
        ],
        overrides: {
          destinations: [{ backend: 'bao', target: { path: `apps/${secretName}`, shape: JSON_SHAPE } }],
        },
      },
    ],
    {
      policy: {
        backends: {
          bao: VaultBackendConfig.parse({
            kind: 'vault',
            address: vault.address,
            mount: 'secret',
            timeoutMs: 10_000,
            auth: { method: 'token', token: `env:${TOKEN_ENV}` },
          }),
        },
      },
      runtime: { env: { [TOKEN_ENV]: vault.rootToken } },
    },
  );
  const core = real.admin.makeApiClient(CoreV1Api);
  return {
    cluster,
    kubelet,
    bench,
    keyId,
    secretName,
    deployment,
    async storedDigest() {
      const response = await request(`${vault.address}/v1/secret/data/apps/${secretName}`, {
        headers: { 'x-vault-token': vault.rootToken },
      });
      const body = (await response.body.json()) as { data?: { data?: { apiKey?: string } } };
      const value = body.data?.data?.apiKey;
      if (value === undefined)
        throw new Error(
          `OpenBao holds no apiKey at secret/apps/${secretName} (HTTP ${String(response.statusCode)})`,
        );
      return valueDigest(value);
    },
    async secretDigest() {
      try {
        const secret = await core.readNamespacedSecret({ namespace: cluster.namespace, name: secretName });
        const encoded = secret.data?.apiKey;
        return encoded === undefined ? undefined : valueDigest(Buffer.from(encoded, 'base64'));
      } catch {
        return undefined;
      }
    },
    async replicaSets() {
      const { items } = await apps.listNamespacedReplicaSet({
        namespace: cluster.namespace,
        labelSelector: `app=${deployment}`,
      });
      return items;
    },
    async close() {
      await kubelet.stop();
      await bench.close();
    },
  };
}

/**
 * Polls the Secret every 20 ms (as the admin) and keeps when each value was first seen, so a test
 * can tell how long after the store the Secret held the new value.
 */
export class SecretWatcher {
  readonly #firstSeen = new Map<string, number>();
  #stopped = false;
  readonly #loop: Promise<void>;

  constructor(consumers: Pick<RealConsumers, 'secretDigest'>) {
    this.#loop = (async () => {
      while (!this.#stopped) {
        const digest = await consumers.secretDigest();
        if (digest !== undefined && !this.#firstSeen.has(digest)) this.#firstSeen.set(digest, Date.now());
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    })();
  }

  firstSeen(digest: string): number | undefined {
    return this.#firstSeen.get(digest);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
  }
}
