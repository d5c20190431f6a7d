// A namespace of the test Kubernetes API server (test/support/kube-apiserver.ts) set up as keyroll
// finds a cluster: external-secrets' real ExternalSecret CRD, workloads made by the admin, and
// keyroll's service account bound to the Role the chart renders (helm template, applied as is),
// under the chart's ValidatingAdmissionPolicy for that account (consumer-admission-policy.ts).
//
// There is no kubelet and no controller here, so the test plays them, and says so:
// `StandInControllers` watches the namespace and does what external-secrets does after a
// force-sync (status.refreshTime at the start of its reconcile, syncedResourceVersion by
// external-secrets' own formula, the Ready condition, written under the resourceVersion it read;
// and nothing when the refresh settings switch force-sync off) and what the deployment,
// statefulset and daemonset controllers do after a change of the pod template
// (observedGeneration, updated and available replicas), recording every restart it sees.
// The same refresh against the real controllers: real-controllers*.test.ts.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  AppsV1Api,
  CustomObjectsApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type KubeConfig,
  type V1CustomResourceDefinition,
  type V1Role,
  type V1RoleBinding,
} from '@kubernetes/client-node';
import { parse, parseAllDocuments } from 'yaml';
import { goDurationMs } from '../../src/consumers/kinds/external-secret-refresh.ts';
import { syncedResourceVersions } from '../../src/consumers/kinds/external-secret-synced.ts';
import { NodeKubeClient } from '../../src/consumers/kubernetes/node-client.ts';
import {
  adminKubeConfig,
  installCustomResourceDefinition,
  serviceAccountCredentials,
  type KubeApiServerInfo,
} from './kube-apiserver.ts';
import { ADMISSION_POLICY_TEMPLATE, applyConsumerAdmissionPolicy } from './consumer-admission-policy.ts';

const run = promisify(execFile);
const ROOT = new URL('../../', import.meta.url).pathname;
const EXTERNAL_SECRETS_CRD = new URL(
  '../fixtures/kubernetes/externalsecrets-crd-v2.9.0.yaml',
  import.meta.url,
);
/** external-secrets v0.15.1's CRD: external-secrets.io v1beta1 (and v1alpha1), no v1. */
export const EXTERNAL_SECRETS_CRD_V1BETA1 = new URL(
  '../fixtures/kubernetes/externalsecrets-crd-v0.15.1.yaml',
  import.meta.url,
);
type EsVersion = 'v1' | 'v1beta1';
const esResource = (version: EsVersion) =>
  ({ group: 'external-secrets.io', version, plural: 'externalsecrets' }) as const;

export interface ConsumerAccess {
  namespace: string;
  externalSecrets?: string[];
  vaultStaticSecrets?: string[];
  deployments?: string[];
  statefulSets?: string[];
  daemonSets?: string[];
}

let helmPath: Promise<string> | undefined;

/** The chart tools' helm (scripts/lib/chart-tools.sh: built once per machine, cached; CI builds it for the chart checks). */
function helm(): Promise<string> {
  helmPath ??= run('sh', ['-c', '. scripts/lib/chart-tools.sh && keyroll_helm'], {
    cwd: ROOT,
    maxBuffer: 1 << 20,
  }).then(({ stdout }) => stdout.trim());
  return helmPath;
}

/** The API versions a Kubernetes 1.31 API server's discovery lists that helm template (no cluster) does not: the kinds the chart asks for. */
export const SERVED_KINDS = ['admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy'] as const;

/**
 * The objects chart templates render for `access` (release `keyroll` in `releaseNamespace`).
 * `set`: more --set flags; `apiVersions`: what the API server serves beyond helm's defaults.
 */
export async function renderConsumerTemplates(
  releaseNamespace: string,
  access: readonly ConsumerAccess[],
  templates: readonly string[],
  options: { set?: readonly string[]; apiVersions?: readonly string[] } = {},
): Promise<{ kind?: string }[]> {
  const { stdout } = await run(
    await helm(),
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
      `consumerAccess=${JSON.stringify(access)}`,
      ...(options.apiVersions ?? SERVED_KINDS).flatMap((version) => ['--api-versions', version]),
      ...(options.set ?? []).flatMap((flag) => ['--set', flag]),
      ...templates.flatMap((template) => ['--show-only', template]),
    ],
    { cwd: ROOT, maxBuffer: 1 << 22 },
  );
  return parseAllDocuments(stdout)
    .map((doc) => doc.toJS() as { kind?: string } | null)
    .filter((object): object is { kind?: string } => object !== null);
}

/** The Role and RoleBinding objects the chart renders for `access` (release `keyroll` in `releaseNamespace`). */
export async function renderConsumerRbac(
  releaseNamespace: string,
  access: readonly ConsumerAccess[],
): Promise<(V1Role | V1RoleBinding)[]> {
  return renderConsumerTemplates(releaseNamespace, access, ['templates/consumer-rbac.yaml']);
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

export interface ConsumerNamespace {
  kube: KubeApiServerInfo;
  namespace: string;
  /** Where keyroll's service account lives (the release namespace). */
  releaseNamespace: string;
  admin: KubeConfig;
  /** keyroll's service account, bound by the chart's Role. */
  keyroll: KubeConfig;
  client: NodeKubeClient;
  /** A kubeconfig file acting as keyroll's service account (for the CLI). */
  kubeconfigFile: string;
  /** The external-secrets.io version its ExternalSecrets are made and read in. */
  esVersion: EsVersion;
  createExternalSecret(
    name: string,
    spec?: { refreshInterval?: string; refreshPolicy?: string },
  ): Promise<void>;
  /** Writes the status external-secrets writes after a sync (as if it synced the object an hour ago, when it was created). */
  markSynced(name: string): Promise<void>;
  createDeployment(name: string, replicas?: number): Promise<void>;
  createStatefulSet(name: string, options?: { replicas?: number; onDelete?: boolean }): Promise<void>;
  createDaemonSet(name: string): Promise<void>;
  readWorkload(
    kind: 'deployments' | 'statefulsets' | 'daemonsets',
    name: string,
  ): Promise<{
    metadata?: { annotations?: Record<string, string>; generation?: number };
    spec?: { template?: { metadata?: { annotations?: Record<string, string> } } };
  }>;
  readExternalSecret(
    name: string,
  ): Promise<{ metadata?: { annotations?: Record<string, string> }; status?: unknown }>;
}

/** Each API server's ExternalSecret CRD, installed once. */
const crdInstalled = new Map<string, Promise<void>>();

export interface NamespaceOptions {
  /** The ExternalSecret CRD the API server gets (default v2.9.0's, serving v1), or none at all. */
  crd?: URL | 'none';
  esVersion?: EsVersion;
}

/**
 * A fresh namespace with the ExternalSecret CRD, and keyroll's service account bound to the Role
 * the chart renders for `access` (which names objects in this namespace).
 */
export async function consumerNamespace(
  kube: KubeApiServerInfo,
  dir: string,
  access: (namespace: string) => ConsumerAccess[],
  options: NamespaceOptions = {},
): Promise<ConsumerNamespace> {
  const crd = options.crd ?? EXTERNAL_SECRETS_CRD;
  if (crd !== 'none') {
    const installed =
      crdInstalled.get(kube.server) ??
      readFile(crd, 'utf8').then((text) =>
        installCustomResourceDefinition(kube, parse(text) as V1CustomResourceDefinition),
      );
    crdInstalled.set(kube.server, installed);
    await installed;
  }
  const esVersion = options.esVersion ?? 'v1';
  const ES = esResource(esVersion);
  const namespace = uniqueName('shop');
  const releaseNamespace = uniqueName('keyroll');
  const admin = adminKubeConfig(kube);
  const { kubeConfig: keyroll } = await serviceAccountCredentials(kube, releaseNamespace, 'keyroll');
  // The namespace of the consumers, made by the admin as a platform team would.
  await serviceAccountCredentials(kube, namespace, 'default');
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  const granted = access(namespace);
  for (const object of await renderConsumerRbac(releaseNamespace, granted)) {
    const objectNamespace = object.metadata?.namespace ?? namespace;
    if (object.kind === 'Role') await rbac.createNamespacedRole({ namespace: objectNamespace, body: object });
    else
      await rbac.createNamespacedRoleBinding({ namespace: objectNamespace, body: object as V1RoleBinding });
  }
  // And the chart's ValidatingAdmissionPolicy, in force before the test patches anything: keyroll's
  // own patches must pass it (consumer-admission-policy.ts).
  await applyConsumerAdmissionPolicy(
    kube,
    await renderConsumerTemplates(releaseNamespace, granted, [ADMISSION_POLICY_TEMPLATE]),
    { releaseNamespace, serviceAccount: 'keyroll', namespace },
  );
  const kubeconfigFile = join(dir, 'kubeconfig');
  await writeFile(kubeconfigFile, keyroll.exportConfig(), { mode: 0o600 });
  const apps = admin.makeApiClient(AppsV1Api);
  const objects = admin.makeApiClient(CustomObjectsApi);
  const template = (name: string) => ({
    metadata: { labels: { app: name } },
    spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
  });
  return {
    kube,
    namespace,
    releaseNamespace,
    admin,
    keyroll,
    client: new NodeKubeClient(keyroll),
    kubeconfigFile,
    esVersion,
    async createExternalSecret(name, spec = {}) {
      await objects.createNamespacedCustomObject({
        ...ES,
        namespace,
        body: {
          apiVersion: `external-secrets.io/${esVersion}`,
          kind: 'ExternalSecret',
          metadata: { name },
          spec: {
            refreshInterval: '1h',
            ...spec,
            secretStoreRef: { kind: 'ClusterSecretStore', name: 'vault' },
            target: { name },
            data: [{ secretKey: 'apiKey', remoteRef: { key: `apps/${name}`, property: 'apiKey' } }],
          },
        },
      });
    },
    async markSynced(name) {
      const object = (await objects.getNamespacedCustomObject({ ...ES, namespace, name })) as KubeObjectLike;
      const at = `${new Date(Date.now() - 3_600_000).toISOString().slice(0, 19)}Z`;
      const status = {
        refreshTime: at,
        syncedResourceVersion: syncedResourceVersions(object)?.sha3,
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'SecretSynced',
            message: 'secret synced',
            lastTransitionTime: at,
          },
        ],
      };
      await objects.patchNamespacedCustomObjectStatus(
        { ...ES, namespace, name, body: { status } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    },
    async createDeployment(name, replicas = 2) {
      await apps.createNamespacedDeployment({
        namespace,
        body: {
          metadata: { name },
          spec: { replicas, selector: { matchLabels: { app: name } }, template: template(name) },
        },
      });
    },
    async createStatefulSet(name, options = {}) {
      await apps.createNamespacedStatefulSet({
        namespace,
        body: {
          metadata: { name },
          spec: {
            replicas: options.replicas ?? 2,
            serviceName: name,
            selector: { matchLabels: { app: name } },
            template: template(name),
            ...(options.onDelete === true ? { updateStrategy: { type: 'OnDelete' } } : {}),
          },
        },
      });
    },
    async createDaemonSet(name) {
      await apps.createNamespacedDaemonSet({
        namespace,
        body: {
          metadata: { name },
          spec: { selector: { matchLabels: { app: name } }, template: template(name) },
        },
      });
    },
    async readWorkload(kind, name) {
      return (await objects.getNamespacedCustomObject({
        group: 'apps',
        version: 'v1',
        namespace,
        plural: kind,
        name,
      })) as Awaited<ReturnType<ConsumerNamespace['readWorkload']>>;
    },
    async readExternalSecret(name) {
      return (await objects.getNamespacedCustomObject({ ...ES, namespace, name })) as Awaited<
        ReturnType<ConsumerNamespace['readExternalSecret']>
      >;
    },
  };
}

type KubeObjectLike = {
  metadata?: {
    name?: string;
    generation?: number;
    resourceVersion?: string;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
  spec?: unknown;
  status?: unknown;
};

export interface StandInOptions {
  /** external-secrets' syncedResourceVersion: its own formula (v0.16.2+: sha3-224), or none written (a controller whose value keyroll cannot check). */
  syncedResourceVersion?: 'eso' | 'none';
  /** external-secrets' clock, for status.refreshTime (default: this machine's). */
  clock?: () => number;
  /** external-secrets' reaction time to a force-sync. */
  syncDelayMs?: number;
  /** ExternalSecrets external-secrets cannot sync (Ready False, reason SecretSyncedError). */
  failingSyncs?: Set<string>;
  /** ExternalSecrets external-secrets does not touch at all (a stopped controller). */
  ignoredSyncs?: Set<string>;
  /** How long a rollout takes once the controller sees the restart. */
  rolloutMs?: number;
  /** Workloads whose rollout never completes (pods that never become ready). */
  stuckRollouts?: Set<string>;
}

/** A restart the stand-in controllers saw: the workload, its new restartedAt, and when. */
export interface SeenRestart {
  plural: string;
  name: string;
  restartedAt: string | undefined;
  atMs: number;
}

/**
 * Stand-ins for external-secrets and the workload controllers, for a cluster that has neither (see
 * the top of this file). They poll the namespace (as the admin) every few tens of milliseconds.
 */
export class StandInControllers {
  readonly restarts: SeenRestart[] = [];
  /** Each ExternalSecret's syncs: when the stand-in external-secrets wrote its status. */
  readonly syncs = new Map<string, number[]>();
  readonly options: StandInOptions;
  readonly #objects: CustomObjectsApi;
  readonly #namespace: string;
  readonly #handledForceSync = new Map<string, string>();
  readonly #handledGeneration = new Map<string, number>();
  readonly #template = new Map<string, string | undefined>();
  #stopped = false;
  readonly #loop: Promise<void>;

  readonly #es: ReturnType<typeof esResource>;

  constructor(
    cluster: Pick<ConsumerNamespace, 'admin' | 'namespace'> & Partial<Pick<ConsumerNamespace, 'esVersion'>>,
    options: StandInOptions = {},
  ) {
    this.options = options;
    this.#es = esResource(cluster.esVersion ?? 'v1');
    this.#objects = cluster.admin.makeApiClient(CustomObjectsApi);
    this.#namespace = cluster.namespace;
    this.#loop = this.#run();
  }

  restartsOf(name: string): SeenRestart[] {
    return this.restarts.filter((restart) => restart.name === name);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      try {
        await this.#externalSecrets().catch(() => undefined);
        for (const plural of ['deployments', 'statefulsets', 'daemonsets']) await this.#workloads(plural);
      } catch {
        // A test that deletes its namespace early (or a cluster without the ExternalSecret CRD); the next round reads again.
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  async #externalSecrets(): Promise<void> {
    const ES = this.#es;
    const list = (await this.#objects.listNamespacedCustomObject({ ...ES, namespace: this.#namespace })) as {
      items: (KubeObjectLike & { metadata: { name: string } })[];
    };
    for (const item of list.items) {
      const name = item.metadata.name;
      const forceSync = item.metadata.annotations?.['force-sync'];
      if (
        forceSync === undefined ||
        this.#handledForceSync.get(name) === forceSync ||
        this.options.ignoredSyncs?.has(name) === true
      )
        continue;
      this.#handledForceSync.set(name, forceSync);
      if (!refreshesOnChange(item)) continue;
      const delay = this.options.syncDelayMs ?? 0;
      const failing = this.options.failingSyncs?.has(name) === true;
      // external-secrets' reconcile: refreshTime is its start, syncedResourceVersion the metadata it read.
      const started = new Date(this.options.clock?.() ?? Date.now());
      const synced =
        this.options.syncedResourceVersion === 'none'
          ? {}
          : { syncedResourceVersion: syncedResourceVersions(item)?.sha3 };
      setTimeout(() => {
        const at = `${new Date().toISOString().slice(0, 19)}Z`;
        const status = failing
          ? {
              conditions: [
                {
                  type: 'Ready',
                  status: 'False',
                  reason: 'SecretSyncedError',
                  message: 'could not get secret data from provider',
                  lastTransitionTime: at,
                },
              ],
            }
          : {
              refreshTime: `${started.toISOString().slice(0, 19)}Z`,
              ...synced,
              conditions: [
                {
                  type: 'Ready',
                  status: 'True',
                  reason: 'SecretSynced',
                  message: 'secret synced',
                  lastTransitionTime: at,
                },
              ],
            };
        // Under the version it read, as external-secrets' status update: a change since means a 409 and a new reconcile.
        this.#objects
          .patchNamespacedCustomObjectStatus(
            {
              ...ES,
              namespace: this.#namespace,
              name,
              body: { metadata: { resourceVersion: item.metadata.resourceVersion }, status },
            },
            setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
          )
          .then(() => {
            if (!failing) this.syncs.set(name, [...(this.syncs.get(name) ?? []), Date.now()]);
          })
          .catch(() => {
            if (this.#handledForceSync.get(name) === forceSync) this.#handledForceSync.delete(name);
          });
      }, delay);
    }
  }

  async #workloads(plural: string): Promise<void> {
    type Workload = {
      metadata: { name: string; generation: number };
      spec: {
        replicas?: number;
        updateStrategy?: { type?: string };
        template: { metadata?: { annotations?: Record<string, string> } };
      };
      status?: { observedGeneration?: number };
    };
    const list = (await this.#objects.listNamespacedCustomObject({
      group: 'apps',
      version: 'v1',
      namespace: this.#namespace,
      plural,
    })) as { items: Workload[] };
    for (const item of list.items) {
      const { name, generation } = item.metadata;
      const key = `${plural}/${name}`;
      const handled = this.#handledGeneration.get(key);
      if (handled === generation) continue;
      this.#handledGeneration.set(key, generation);
      // A new pod template rolls the pods; a new generation without one (a Deployment's
      // annotations changed: they are copied to its ReplicaSets) rolls nothing.
      const restartedAt = item.spec.template.metadata?.annotations?.['kubectl.kubernetes.io/restartedAt'];
      const rolls = this.#template.has(key)
        ? this.#template.get(key) !== restartedAt
        : restartedAt !== undefined;
      this.#template.set(key, restartedAt);
      if (rolls) this.restarts.push({ plural, name, restartedAt, atMs: Date.now() });
      if (!rolls && handled !== undefined) {
        await this.#status(plural, name, { observedGeneration: generation });
        continue;
      }
      if (this.options.stuckRollouts?.has(name) === true) {
        await this.#status(plural, name, {
          observedGeneration: generation,
          ...progress(plural, item.spec.replicas ?? 1, 0),
        });
        continue;
      }
      const finish = (): void => {
        this.#status(plural, name, {
          observedGeneration: generation,
          ...progress(plural, item.spec.replicas ?? 1, item.spec.replicas ?? 1, generation),
        }).catch(() => undefined);
      };
      if ((this.options.rolloutMs ?? 0) === 0) finish();
      else setTimeout(finish, this.options.rolloutMs);
    }
  }

  async #status(plural: string, name: string, status: Record<string, unknown>): Promise<void> {
    await this.#objects.patchNamespacedCustomObjectStatus(
      { group: 'apps', version: 'v1', namespace: this.#namespace, plural, name, body: { status } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
}

/** external-secrets' shouldRefresh for a changed object: never under CreatedOnce once synced, nor with refreshInterval 0 unless OnChange. */
function refreshesOnChange(item: KubeObjectLike): boolean {
  const spec = (item.spec ?? {}) as { refreshPolicy?: string; refreshInterval?: string };
  const syncedBefore =
    typeof (item.status as { syncedResourceVersion?: unknown } | undefined)?.syncedResourceVersion ===
    'string';
  if (spec.refreshPolicy === 'CreatedOnce') return !syncedBefore;
  if (spec.refreshPolicy === 'OnChange') return true;
  return !(syncedBefore && (goDurationMs(spec.refreshInterval ?? '1h') ?? 1) <= 0);
}

/** The status fields a workload controller writes once `ready` of `replicas` pods run the new template. */
function progress(plural: string, replicas: number, ready: number, generation = 0): Record<string, unknown> {
  if (plural === 'daemonsets')
    return {
      desiredNumberScheduled: 2,
      currentNumberScheduled: 2,
      numberMisscheduled: 0,
      numberReady: ready === 0 ? 0 : 2,
      updatedNumberScheduled: ready === 0 ? 0 : 2,
      numberAvailable: ready === 0 ? 0 : 2,
    };
  if (plural === 'statefulsets') {
    const revision = `rev-${String(generation)}`;
    return {
      replicas,
      readyReplicas: ready,
      updatedReplicas: ready,
      currentReplicas: ready,
      currentRevision: ready === replicas ? revision : 'rev-old',
      updateRevision: revision,
      availableReplicas: ready,
    };
  }
  return { replicas, updatedReplicas: ready, readyReplicas: ready, availableReplicas: ready };
}
