// The real controllers keyroll's consumers meet in a cluster, for the tests: kube-controller-manager
// (the deployment, replicaset, statefulset and daemonset controllers) and the external-secrets
// controller of a given release, built by scripts/test-controllers.sh, run out of cluster with
// the admin's kubeconfig beside a kube-apiserver of their own (test/support/kube-apiserver.ts).
// Their own API server, not the run's shared one: the controllers act on every namespace, and the
// stand-in tests of the shared server (test/support/consumer-cluster.ts) must not meet them;
// each release also brings CRDs of its own (0.14 serves only v1beta1).
//
// The one stand-in left is `StandInKubelet`: there is no kubelet, so nothing would run the pods
// the ReplicaSets create. It marks each new pod Running and Ready once the Secrets its containers
// reference exist (as a kubelet starts a container only then), and records a digest of the value
// each pod got at that moment, so a test can assert that the pods run on the stored value.
import { createHash } from 'node:crypto';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  CoreV1Api,
  CustomObjectsApi,
  loadYaml,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1CustomResourceDefinition,
  type V1Pod,
} from '@kubernetes/client-node';
import { Agent, request } from 'undici';
import { parseAllDocuments } from 'yaml';
import {
  adminKubeConfig,
  installCustomResourceDefinition,
  startKubeApiServer,
  type RunningKubeApiServer,
} from './kube-apiserver.ts';
import { freePort, startProcess, stopProcess, waitReady, type Started } from './local-servers.ts';
import { createTempDir } from './temp-dir.ts';

/** What scripts/test-controllers.sh installed (the directory it prints), read by readControllerTools. */
export interface ControllerTools {
  kubeControllerManager: string;
  /** Each built external-secrets release, newest first. */
  externalSecrets: { version: string; binary: string; crds: string }[];
  /** Releases whose CRD bundle alone is there (no controller built). */
  crdsOnly: { version: string; crds: string }[];
  /** Stakater Reloader, when the directory holds it. */
  reloader?: string;
}

function byVersionDescending<T extends { version: string }>(a: T, b: T): number {
  const parts = (version: string): number[] => version.replace(/^v/, '').split('.').map(Number);
  const [x, y] = [parts(a.version), parts(b.version)];
  for (let i = 0; i < 3; i++) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (y[i] ?? 0) - (x[i] ?? 0);
  return 0;
}

export async function readControllerTools(dir: string): Promise<ControllerTools> {
  const entries = await readdir(dir);
  const externalSecrets = entries
    .map((entry) => /^external-secrets-(v\d+\.\d+\.\d+)$/.exec(entry))
    .filter((match): match is RegExpExecArray => match !== null)
    .map(([entry, version = '']) => ({
      version,
      binary: join(dir, entry, 'external-secrets'),
      crds: join(dir, entry, 'crds.yaml'),
    }))
    .sort(byVersionDescending);
  const crdsOnly = entries
    .map((entry) => /^external-secrets-crds-(v\d+\.\d+\.\d+)\.yaml$/.exec(entry))
    .filter((match): match is RegExpExecArray => match !== null)
    .map(([entry, version = '']) => ({ version, crds: join(dir, entry) }))
    .sort(byVersionDescending);
  if (!entries.includes('kube-controller-manager') || externalSecrets.length === 0)
    throw new Error(
      `${dir} holds no kube-controller-manager or external-secrets release (run scripts/test-controllers.sh)`,
    );
  return {
    kubeControllerManager: join(dir, 'kube-controller-manager'),
    externalSecrets,
    crdsOnly,
    ...(entries.includes('reloader') ? { reloader: join(dir, 'reloader') } : {}),
  };
}

export interface RealClusterOptions {
  /** The directory scripts/test-kube.sh prints (kube-apiserver, etcd). */
  kubeBinDir: string;
  tools: ControllerTools;
  /** The CRD bundle to install (a release's deploy/crds/bundle.yaml). */
  crds: string;
  /** The external-secrets release to run, with the OpenBao its ClusterSecretStore `vault` reads; none runs without it. */
  externalSecrets?: { binary: string; vault: { address: string; token: string } };
  /** Stakater Reloader's binary, run with its defaults (env-vars strategy, every namespace). */
  reloader?: string;
}

export interface RealCluster {
  kube: RunningKubeApiServer;
  admin: KubeConfig;
  /** The controllers' last output, for a failing test's message (it holds no secret: the log levels keep values out). */
  controllerOutput(): string;
  stop(): Promise<void>;
}

const ESO_NAMESPACE = 'external-secrets';
/** The name of the ClusterSecretStore the ExternalSecrets reference (as consumer-cluster.ts's do). */
export const VAULT_STORE = 'vault';

/** The admin kubeconfig, as a file the controllers read (KUBECONFIG). */
async function writeAdminKubeconfig(dir: string, admin: KubeConfig): Promise<string> {
  const file = join(dir, 'admin.kubeconfig');
  await writeFile(file, admin.exportConfig(), { mode: 0o600 });
  return file;
}

async function installBundle(kube: RunningKubeApiServer, file: string): Promise<void> {
  // Through client-node's own YAML loader: its serializer sends only the fields it knows by their
  // TypeScript names, so a plain parse would lose `x-kubernetes-preserve-unknown-fields` (and the
  // API server then refuses 0.14's generator CRDs: "type: Required value").
  const definitions = parseAllDocuments(await readFile(file, 'utf8'))
    .filter((document) => (document.toJS() as { kind?: unknown } | null)?.kind === 'CustomResourceDefinition')
    .map((document) => loadYaml<V1CustomResourceDefinition>(document.toString()));
  await Promise.all(definitions.map((definition) => installCustomResourceDefinition(kube, definition)));
}

async function startKubeControllerManager(binary: string, dir: string, kubeconfig: string): Promise<Started> {
  const port = await freePort();
  const started = startProcess(binary, [
    `--kubeconfig=${kubeconfig}`,
    // The workload controllers keyroll's restarts go through; nothing else (no service-account
    // tokens: the controllers act as the admin, whose certificate the kubeconfig holds).
    '--controllers=deployment-controller,replicaset-controller,statefulset-controller,daemonset-controller',
    '--leader-elect=false',
    '--bind-address=127.0.0.1',
    `--secure-port=${String(port)}`,
    `--cert-dir=${join(dir, 'kube-controller-manager')}`,
    `--authentication-kubeconfig=${kubeconfig}`,
    `--authorization-kubeconfig=${kubeconfig}`,
    '--v=1',
  ]);
  const agent = new Agent({ connect: { rejectUnauthorized: false } });
  try {
    // /healthz is open to anyone (the default --authorization-always-allow-paths).
    await waitReady(started, 'kube-controller-manager', async () => {
      const response = await request(`https://127.0.0.1:${String(port)}/healthz`, {
        dispatcher: agent,
        headersTimeout: 2_000,
        bodyTimeout: 2_000,
      });
      await response.body.dump();
      return response.statusCode === 200;
    });
  } catch (error) {
    await stopProcess(started);
    throw error;
  } finally {
    await agent.close();
  }
  return started;
}

async function startExternalSecrets(
  binary: string,
  kubeconfig: string,
  admin: KubeConfig,
  vault: { address: string; token: string },
): Promise<Started> {
  const core = admin.makeApiClient(CoreV1Api);
  const objects = admin.makeApiClient(CustomObjectsApi);
  await core.createNamespace({ body: { metadata: { name: ESO_NAMESPACE } } });
  await core.createNamespacedSecret({
    namespace: ESO_NAMESPACE,
    body: { metadata: { name: 'vault-token' }, stringData: { token: vault.token } },
  });
  await objects.createClusterCustomObject({
    group: 'external-secrets.io',
    version: 'v1',
    plural: 'clustersecretstores',
    body: {
      apiVersion: 'external-secrets.io/v1',
      kind: 'ClusterSecretStore',
      metadata: { name: VAULT_STORE },
      spec: {
        provider: {
          vault: {
            server: vault.address,
            path: 'secret',
            version: 'v2',
            auth: { tokenSecretRef: { name: 'vault-token', key: 'token', namespace: ESO_NAMESPACE } },
          },
        },
      },
    },
  });
  const help = await helpText(binary);
  const started = startProcess(
    binary,
    [
      // No listener of its own (the default ports would collide with anything on the machine).
      '--metrics-addr=0',
      ...(help.includes('--live-addr') ? ['--live-addr=0'] : []),
      '--enable-leader-election=false',
      '--loglevel=info',
    ],
    { KUBECONFIG: kubeconfig },
  );
  try {
    // Running and able to read the store: it validated the ClusterSecretStore against OpenBao.
    await waitReady(started, 'external-secrets', async () => {
      const store = (await objects.getClusterCustomObject({
        group: 'external-secrets.io',
        version: 'v1',
        plural: 'clustersecretstores',
        name: VAULT_STORE,
      })) as { status?: { conditions?: { type: string; status: string }[] } };
      return (
        store.status?.conditions?.some(
          (condition) => condition.type === 'Ready' && condition.status === 'True',
        ) === true
      );
    });
  } catch (error) {
    await stopProcess(started);
    throw error;
  }
  return started;
}

/**
 * Stakater Reloader out of cluster (KUBECONFIG), with its defaults. It serves metrics on :9090,
 * which it does not let one change: one Reloader at a time on a machine.
 */
async function startReloader(binary: string, kubeconfig: string): Promise<Started> {
  const started = startProcess(binary, ['--log-level=info'], { KUBECONFIG: kubeconfig });
  try {
    // Its Secret controller runs once it says so (it then lists and watches Secrets).
    await waitReady(started, 'reloader', () =>
      Promise.resolve(
        started.output.join('').includes('Starting Controller to watch resource type: secrets'),
      ),
    );
  } catch (error) {
    await stopProcess(started);
    throw error;
  }
  return started;
}

async function helpText(binary: string): Promise<string> {
  const started = startProcess(binary, ['--help']);
  await new Promise<void>((resolveExit) => {
    if (started.child.exitCode !== null) resolveExit();
    else
      started.child.once('exit', () => {
        resolveExit();
      });
  });
  return started.output.join('');
}

/** A kube-apiserver of its own with the CRDs of `crds`, kube-controller-manager, and external-secrets when asked. */
export async function startRealCluster(options: RealClusterOptions): Promise<RealCluster> {
  const temp = await createTempDir('keyroll-controllers-');
  const processes: Started[] = [];
  let kube: RunningKubeApiServer | undefined;
  const stop = async (): Promise<void> => {
    for (const started of processes.reverse()) await stopProcess(started);
    await kube?.stop();
    await temp.remove();
  };
  try {
    kube = await startKubeApiServer(options.kubeBinDir);
    const admin = adminKubeConfig(kube);
    const kubeconfig = await writeAdminKubeconfig(temp.path, admin);
    await installBundle(kube, options.crds);
    processes.push(
      await startKubeControllerManager(options.tools.kubeControllerManager, temp.path, kubeconfig),
    );
    if (options.externalSecrets !== undefined)
      processes.push(
        await startExternalSecrets(
          options.externalSecrets.binary,
          kubeconfig,
          admin,
          options.externalSecrets.vault,
        ),
      );
    if (options.reloader !== undefined) processes.push(await startReloader(options.reloader, kubeconfig));
    const running = kube;
    return {
      kube: running,
      admin,
      controllerOutput: () =>
        processes.map((started) => started.output.join('').slice(-3000)).join('\n---\n'),
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** A short digest of a value: what the tests compare, so no value reaches a failure message. */
export function valueDigest(value: string | Buffer): string {
  return createHash('sha256').update(value).digest('hex').slice(0, 16);
}

/** A pod the stand-in kubelet started: its ReplicaSet (or other owner) and the digest of each value it got. */
export interface StartedPod {
  name: string;
  owner: string | undefined;
  /** `secretName/key` → valueDigest of the value the pod got when it started. */
  values: Record<string, string>;
  readyAtMs: number;
}

function referencedKeys(pod: V1Pod): { secret: string; key: string }[] {
  const keys: { secret: string; key: string }[] = [];
  for (const container of pod.spec?.containers ?? []) {
    for (const env of container.env ?? []) {
      const ref = env.valueFrom?.secretKeyRef;
      if (ref?.name !== undefined && ref.key !== '') keys.push({ secret: ref.name, key: ref.key });
    }
  }
  return keys;
}

/**
 * The one stand-in left (see the top of this file): starts the namespace's pods as a kubelet would,
 * once the Secrets they reference exist, and records the value each one got. Polls as the admin.
 */
export class StandInKubelet {
  readonly pods: StartedPod[] = [];
  readonly #core: CoreV1Api;
  readonly #namespace: string;
  readonly #started = new Set<string>();
  #stopped = false;
  readonly #loop: Promise<void>;

  constructor(admin: KubeConfig, namespace: string) {
    this.#core = admin.makeApiClient(CoreV1Api);
    this.#namespace = namespace;
    this.#loop = this.#run();
  }

  /** The pods started for an owner (a ReplicaSet's name). */
  podsOf(owner: string): StartedPod[] {
    return this.pods.filter((pod) => pod.owner === owner);
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await this.#loop;
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      try {
        await this.#startPods();
      } catch {
        // A namespace deleted under the loop, a pod deleted between list and patch: next round.
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }

  async #startPods(): Promise<void> {
    const { items } = await this.#core.listNamespacedPod({ namespace: this.#namespace });
    for (const pod of items) {
      const name = pod.metadata?.name;
      if (
        name === undefined ||
        this.#started.has(pod.metadata?.uid ?? name) ||
        pod.metadata?.deletionTimestamp !== undefined
      )
        continue;
      const values = await this.#values(pod);
      if (values === undefined) continue;
      const now = new Date();
      const at = now.toISOString();
      const containers = (pod.spec?.containers ?? []).map((container) => ({
        name: container.name,
        image: container.image ?? '',
        imageID: '',
        ready: true,
        started: true,
        restartCount: 0,
        state: { running: { startedAt: at } },
      }));
      const conditions = ['PodScheduled', 'Initialized', 'ContainersReady', 'Ready'].map((type) => ({
        type,
        status: 'True',
        lastTransitionTime: at,
      }));
      await this.#core.patchNamespacedPodStatus(
        {
          namespace: this.#namespace,
          name,
          body: { status: { phase: 'Running', startTime: at, conditions, containerStatuses: containers } },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      this.#started.add(pod.metadata?.uid ?? name);
      const owner = pod.metadata?.ownerReferences?.find((reference) => reference.controller === true)?.name;
      this.pods.push({ name, owner, values, readyAtMs: now.getTime() });
    }
  }

  /** The digests of the values the pod's containers reference, or undefined while one is missing (a kubelet waits too). */
  async #values(pod: V1Pod): Promise<Record<string, string> | undefined> {
    const values: Record<string, string> = {};
    for (const { secret, key } of referencedKeys(pod)) {
      let data: Record<string, string> | undefined;
      try {
        data = (await this.#core.readNamespacedSecret({ namespace: this.#namespace, name: secret })).data;
      } catch {
        return undefined;
      }
      const encoded = data?.[key];
      if (encoded === undefined) return undefined;
      values[`${secret}/${key}`] = valueDigest(Buffer.from(encoded, 'base64'));
    }
    return values;
  }
}
