// Issue 28, "Beyond": a Vault Secrets Operator VaultStaticSecret as a consumer, on the real
// kube-apiserver with the operator's own CRD (v1.4.1, test/fixtures/kubernetes), keyroll bound by
// the chart's Role and admission policy, and keyroll storing into the real OpenBao.
//
// The operator itself is played by a stand-in (StandInVaultOperator below): the Go module proxy
// serves no recent vault-secrets-operator (v1.0.1 to v1.4.1 answer "403 This module version is not
// available"; only v0.10.0 is served), and a real one also needs a VaultConnection and a VaultAuth
// method OpenBao would have to be set up for. The stand-in does what the operator's
// VaultStaticSecret controller does (controllers/vaultstaticsecret_controller.go, v1.4.1): it
// reconciles on a change of the object's annotations or generation (syncableSecretPredicate), reads
// the KV v2 secret, and when the HMAC of the data differs from status.secretMAC, writes the
// Kubernetes Secret, then status.secretMAC and lastGeneration. It never acts on its own schedule
// (refreshAfter is an hour), so every sync seen here is one keyroll asked for.
import { createHmac, randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { VaultBackendConfig } from '../../../src/backends/vault/config.ts';
import { checkConsumers } from '../../../src/consumers/check.ts';
import { SYNC_REQUESTED, VAULT_STATIC_SECRET } from '../../../src/consumers/kinds/vault-static-secret.ts';
import { installCustomResourceDefinition } from '../../support/kube-apiserver.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { JSON_SHAPE } from '../../rotation/harness.ts';
import { kubeApiServer, vaultServer, type VaultServer } from '../servers.ts';
import { consumerNamespace, uniqueName, type ConsumerNamespace } from '../../support/consumer-cluster.ts';
import { consumerBench, LEAK, type ConsumerBench } from '../../support/consumer-bench.ts';

const CRD = new URL('../../fixtures/kubernetes/vaultstaticsecrets-crd-v1.4.1.yaml', import.meta.url);
const TOKEN_ENV = 'KR_VSO_TEST_VAULT_TOKEN';

type VaultStaticSecret = {
  metadata?: { annotations?: Record<string, string>; generation?: number };
  spec?: { path?: string; destination?: { name?: string } };
  status?: { secretMAC?: string; lastGeneration?: number };
};

/** The one stand-in: Vault Secrets Operator's VaultStaticSecret controller, for one object. */
class StandInVaultOperator {
  readonly #objects: CustomObjectsApi;
  readonly #core: CoreV1Api;
  readonly #key = randomBytes(32);
  #seen: string | undefined;
  #stopped = false;
  readonly #loop: Promise<void>;
  syncs = 0;

  constructor(admin: KubeConfig, vault: VaultServer, namespace: string, name: string) {
    this.#objects = admin.makeApiClient(CustomObjectsApi);
    this.#core = admin.makeApiClient(CoreV1Api);
    this.#loop = (async () => {
      while (!this.#stopped) {
        await this.#reconcileOnChange(vault, namespace, name).catch(() => undefined);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
  }

  async #reconcileOnChange(vault: VaultServer, namespace: string, name: string): Promise<void> {
    const object = (await this.#objects.getNamespacedCustomObject({
      ...VAULT_STATIC_SECRET,
      namespace,
      name,
    })) as VaultStaticSecret;
    const trigger = JSON.stringify([object.metadata?.annotations ?? {}, object.metadata?.generation]);
    if (trigger === this.#seen) return;
    this.#seen = trigger;
    const response = await request(`${vault.address}/v1/secret/data/${object.spec?.path ?? ''}`, {
      headers: { 'x-vault-token': vault.rootToken },
    });
    const body = (await response.body.json()) as { data?: { data?: Record<string, string> } };
    const data = body.data?.data;
    if (data === undefined) return;
    const mac = createHmac('sha256', this.#key).update(JSON.stringify(data)).digest('base64');
    if (mac === object.status?.secretMAC && object.status.lastGeneration === object.metadata?.generation)
      return;
    const secretName = object.spec?.destination?.name ?? name;
    const secret = {
      metadata: { name: secretName },
      data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v).toString('base64')])),
    };
    await this.#core
      .replaceNamespacedSecret({ namespace, name: secretName, body: secret })
      .catch(() => this.#core.createNamespacedSecret({ namespace, body: secret }));
    // Counted before the status says so: keyroll may read the status before this loop goes on.
    this.syncs++;
    await this.#objects.patchNamespacedCustomObjectStatus(
      {
        ...VAULT_STATIC_SECRET,
        namespace,
        name,
        body: {
          status: {
            secretMAC: mac,
            lastGeneration: object.metadata?.generation ?? 0,
            conditions: [
              {
                type: 'SecretSynced',
                status: 'True',
                reason: 'Synced',
                message: 'Secret synced',
                lastTransitionTime: new Date().toISOString(),
              },
            ],
          },
        },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
  }
}

const server = await kubeApiServer();
const vault = vaultServer();

if (server === undefined || vault === undefined) {
  describe.skip('VaultStaticSecret consumers (no API server or OpenBao; see the global setup message)', () => {
    it('needs kube-apiserver and OpenBao', () => undefined);
  });
} else {
  const kube = server;
  const openBao = vault;
  const temp = useTempDir('keyroll-vso-', 'file');

  describe('a key whose consumer is a VaultStaticSecret', () => {
    let cluster: ConsumerNamespace;
    let bench: ConsumerBench;
    let operator: StandInVaultOperator | undefined;
    let name: string;
    let keyId: string;

    beforeAll(async () => {
      await installCustomResourceDefinition(
        kube,
        parse(await readFile(CRD, 'utf8')) as V1CustomResourceDefinition,
      );
    });

    async function setUp(spec: Record<string, unknown> = {}): Promise<void> {
      name = uniqueName('billing-api-key');
      keyId = uniqueName('key_demo_billing').replace(/-/g, '_');
      cluster = await consumerNamespace(kube, temp.path(), (namespace) => [
        { namespace, vaultStaticSecrets: [name] },
      ]);
      await cluster.admin.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
        ...VAULT_STATIC_SECRET,
        namespace: cluster.namespace,
        body: {
          apiVersion: 'secrets.hashicorp.com/v1beta1',
          kind: 'VaultStaticSecret',
          metadata: { name },
          spec: {
            type: 'kv-v2',
            mount: 'secret',
            path: `apps/${name}`,
            refreshAfter: '1h',
            destination: { name, create: true },
            ...spec,
          },
        },
      });
      bench = await consumerBench(
        cluster.client,
        [
          {
            id: keyId,
            consumers: [{ kind: 'vaultStaticSecret', namespace: cluster.namespace, name }],
            overrides: {
              destinations: [{ backend: 'bao', target: { path: `apps/${name}`, shape: JSON_SHAPE } }],
            },
          },
        ],
        {
          policy: {
            backends: {
              bao: VaultBackendConfig.parse({
                kind: 'vault',
                address: openBao.address,
                mount: 'secret',
                timeoutMs: 10_000,
                auth: { method: 'token', token: `env:${TOKEN_ENV}` },
              }),
            },
          },
          runtime: { env: { [TOKEN_ENV]: openBao.rootToken } },
        },
      );
    }

    async function storedApiKey(): Promise<string | undefined> {
      const response = await request(`${openBao.address}/v1/secret/data/apps/${name}`, {
        headers: { 'x-vault-token': openBao.rootToken },
      });
      return ((await response.body.json()) as { data?: { data?: { apiKey?: string } } }).data?.data?.apiKey;
    }

    async function secretApiKey(): Promise<string | undefined> {
      const secret = await cluster.admin
        .makeApiClient(CoreV1Api)
        .readNamespacedSecret({ namespace: cluster.namespace, name });
      const encoded = secret.data?.apiKey;
      return encoded === undefined ? undefined : Buffer.from(encoded, 'base64').toString('utf8');
    }

    afterEach(async () => {
      await operator?.stop();
      operator = undefined;
      await bench.close();
    });

    afterAll(() => undefined);

    it('a leak asks the operator to sync now (keyroll.io/sync-requested, through the admission policy) and reports it refreshed once status.secretMAC shows the stored value synced', async () => {
      await setUp();
      operator = new StandInVaultOperator(cluster.admin, openBao, cluster.namespace, name);
      for (let round = 1; round <= 2; round++) {
        const syncsBefore = operator.syncs;
        const { summary, report } = await bench.run([keyId], LEAK);
        expect(summary.rotated).toBe(1);
        expect(report).toMatchObject({ refreshed: 1, failed: 0 });
        // One sync per rotation, of the stored value (refreshAfter is an hour: keyroll's ask caused it).
        expect(operator.syncs).toBe(syncsBefore + 1);
        const stored = await storedApiKey();
        expect(stored).toBeDefined();
        expect((await secretApiKey()) === stored).toBe(true);
        const object = (await cluster.admin.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
          ...VAULT_STATIC_SECRET,
          namespace: cluster.namespace,
          name,
        })) as VaultStaticSecret;
        expect(object.metadata?.annotations?.[SYNC_REQUESTED]).toBeDefined();
        const rotationId = summary.outcomes[0]?.rotationId ?? '';
        const refreshed = bench
          .events('consumer.refreshed')
          .filter((event) => Array.isArray(event.rotationIds) && event.rotationIds.includes(rotationId));
        expect(refreshed.map((event) => event.consumerKind)).toEqual(['vaultStaticSecret']);
      }
    }, 60_000);

    it("without the operator, keyroll's own patch is no proof: the sync times out and the consumer is reported failed", async () => {
      await setUp();
      const { summary, report } = await bench.run([keyId], LEAK, bench.refresher({ syncTimeoutMs: 1_500 }));
      expect(summary.rotated).toBe(1);
      expect(report).toMatchObject({ refreshed: 0, failed: 1 });
      expect(report?.outcomes[0]?.errorCode).toBe('KR_CONSUMER_TIMEOUT');
    }, 60_000);

    it('hmacSecretData: false is refused at once (KR_CONSUMER_SYNC_UNPROVABLE), by the run and by validate', async () => {
      await setUp({ hmacSecretData: false });
      operator = new StandInVaultOperator(cluster.admin, openBao, cluster.namespace, name);
      const { report } = await bench.run([keyId], LEAK, bench.refresher({ syncTimeoutMs: 60_000 }));
      expect(report).toMatchObject({ refreshed: 0, failed: 1 });
      expect(report?.outcomes[0]?.errorCode).toBe('KR_CONSUMER_SYNC_UNPROVABLE');
      const checks = await checkConsumers(bench.bench.policy.keys, cluster.client);
      expect(checks).toEqual([
        expect.objectContaining({
          consumer: `vaultStaticSecret ${cluster.namespace}/${name}`,
          ok: false,
          errorCode: 'KR_CONSUMER_SYNC_UNPROVABLE',
        }),
      ]);
    }, 90_000);

    it('validate reads it live: exists, access, sync-now works, refreshAfter named as not waited for', async () => {
      await setUp();
      const checks = await checkConsumers(bench.bench.policy.keys, cluster.client);
      expect(checks).toEqual([expect.objectContaining({ ok: true })]);
      expect(checks[0]?.detail).toContain('refreshAfter 1h, not waited for');
    }, 60_000);
  });
}
