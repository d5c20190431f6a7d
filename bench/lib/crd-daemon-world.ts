// The world of bench/crd-daemon.ts: its own kube-apiserver with the keyroll.io CRDs, 10 team
// namespaces and keyroll's, one ClusterKeyApi (the emulator of this process) and one file
// ClusterKeyStore every team may use, a loopback webhook receiver for the keys' consumer, and
// `keyroll daemon --keys-from kubernetes` (dist/) talking to the API server through the counting
// front, with the bench's own watch of the RotatedKeys beside it.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { request, type Agent } from 'undici';
import { adminAgent, createObject, installKeyrollCrds } from '../../test/support/keyroll-crds.ts';
import type { RunningKubeApiServer } from '../../test/support/kube-apiserver.ts';
import { startDistDaemon, type DistDaemon } from './dist-daemon.ts';
import { startBenchKube } from './kube-apiserver.ts';
import { startKubeFront, type KubeFront } from './kube-front.ts';
import { startNoticeReceiver, type NoticeReceiver } from './notice-receiver.ts';
import { startStatusWatch, type StatusWatch } from './status-watch.ts';
import { OWNER_TOKEN, ORG, startWorld, type World } from './world.ts';

const GROUP_PATH = '/apis/keyroll.io/v1alpha1';
export const TEAMS = 10;
/** Creations (and annotations) in flight at once: as bench/crd.ts creates its objects. */
export const CONCURRENCY = 16;
const KEYROLL_NAMESPACE = 'keyroll';
const SINK = 'cache-drop';

export interface BenchKey {
  id: string;
  namespace: string;
  name: string;
  /** `namespace/name`, the watch's key. */
  object: string;
  /** performance.now() when its create call was answered. */
  createdAt?: number;
}

export interface CrdDaemonWorld {
  world: World;
  kube: RunningKubeApiServer;
  front: KubeFront;
  daemon: DistDaemon;
  watch: StatusWatch;
  receiver: NoticeReceiver;
  /** `count` new API keys at the emulator, as RotatedKeys to create (not created yet). */
  addKeys(count: number): BenchKey[];
  createKey(key: BenchKey): Promise<void>;
  annotate(key: BenchKey, name: string, value: string): Promise<void>;
  close(): Promise<void>;
}

function rotatedKey(key: BenchKey): Record<string, unknown> {
  return {
    apiVersion: 'keyroll.io/v1alpha1',
    kind: 'RotatedKey',
    metadata: { namespace: key.namespace, name: key.name },
    spec: {
      id: key.id,
      organization: ORG,
      apiRef: { name: 'emulator' },
      destinations: [
        { storeRef: { kind: 'ClusterKeyStore', name: 'files' }, path: `${key.namespace}/${key.name}.json` },
      ],
      maxAge: '30d',
      // So a `manual` rotate-now is served moments after the first rotation.
      minInterval: '1s',
      consumers: [{ kind: 'webhook', sink: SINK }],
    },
  };
}

async function arrange(kube: RunningKubeApiServer, agent: Agent, world: World, secretsDir: string) {
  await installKeyrollCrds(kube);
  for (const name of [KEYROLL_NAMESPACE, ...Array.from({ length: TEAMS }, (_, i) => `team-${String(i)}`)])
    await createObject(kube, agent, '/api/v1/namespaces', { metadata: { name } });
  await createObject(kube, agent, `${GROUP_PATH}/clusterkeyapis`, {
    apiVersion: 'keyroll.io/v1alpha1',
    kind: 'ClusterKeyApi',
    metadata: { name: 'emulator' },
    spec: {
      baseUrl: world.emulator.url,
      credential: { type: 'bearer', token: 'env:KEYROLL_API_TOKEN' },
      rateLimitPerMinute: 60_000,
      conditions: [{ namespaceSelector: {}, organizations: [ORG] }],
    },
  });
  await createObject(kube, agent, `${GROUP_PATH}/clusterkeystores`, {
    apiVersion: 'keyroll.io/v1alpha1',
    kind: 'ClusterKeyStore',
    metadata: { name: 'files' },
    spec: {
      kind: 'file',
      directory: secretsDir,
      conditions: [{ namespaceSelector: {}, pathPrefix: '{namespace}/' }],
    },
  });
}

function daemonArgs(settings: string, stateDir: string): string[] {
  return [
    ...['--keys-from', 'kubernetes', '--keyroll-namespace', KEYROLL_NAMESPACE],
    ...['--policy', settings, '--listen', '127.0.0.1:0', '--state-dir', stateDir],
  ];
}

/** Starts everything; on a failure stops what it started. */
export async function startCrdDaemonWorld(): Promise<CrdDaemonWorld> {
  const world = await startWorld({ rollRateLimitPerMinute: 60_000 });
  const stops: (() => Promise<unknown>)[] = [() => world.close()];
  const close = async (): Promise<void> => {
    for (const stop of stops.splice(0).reverse()) await stop();
  };
  try {
    const receiver = await startNoticeReceiver();
    stops.push(() => receiver.close());
    const kube = await startBenchKube();
    stops.push(() => kube.stop());
    const agent = adminAgent(kube);
    stops.push(() => agent.close());
    const secretsDir = join(world.dir, 'secrets');
    await mkdir(secretsDir, { recursive: true });
    await arrange(kube, agent, world, secretsDir);
    const front = await startKubeFront(kube);
    stops.push(() => front.close());
    const kubeconfig = join(world.dir, 'kubeconfig.yaml');
    await writeFile(kubeconfig, front.kubeconfig(), { mode: 0o600 });
    const settings = join(world.dir, 'settings.yaml');
    await writeFile(
      settings,
      `version: 1\nkeyApi: emulator\nalerts:\n  sinks:\n    ${SINK}: { kind: webhook, url: "${receiver.url}" }\n`,
    );
    const daemon = startDistDaemon({
      cwd: world.dir,
      args: daemonArgs(settings, join(world.dir, 'state')),
      env: { KUBECONFIG: kubeconfig, KEYROLL_API_TOKEN: OWNER_TOKEN },
    });
    stops.push(() => daemon.stop(5_000));
    await daemon.waitFor('daemon.started', 120_000);
    const watch = await startStatusWatch(kube);
    stops.push(() => watch.stop());
    const send = async (method: 'POST' | 'PATCH', path: string, body: object): Promise<void> => {
      const response = await request(`${kube.server}${path}`, {
        method,
        dispatcher: agent,
        headers: {
          'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json',
        },
        body: JSON.stringify(body),
      });
      const text = await response.body.text();
      if (response.statusCode >= 300)
        throw new Error(`${method} ${path} answered ${String(response.statusCode)}: ${text}`);
    };
    return {
      world,
      kube,
      front,
      daemon,
      watch,
      receiver,
      addKeys: (count) =>
        world.addKeys('key_crd_', count).map((id, index) => {
          const namespace = `team-${String(index % TEAMS)}`;
          const name = `key-${String(index).padStart(5, '0')}`;
          return { id, namespace, name, object: `${namespace}/${name}` };
        }),
      createKey: async (key) => {
        await send('POST', `${GROUP_PATH}/namespaces/${key.namespace}/rotatedkeys`, rotatedKey(key));
        key.createdAt = performance.now();
      },
      annotate: (key, name, value) =>
        send(
          'PATCH',
          `${GROUP_PATH}/namespaces/${key.namespace}/rotatedkeys/${key.name}?fieldManager=bench`,
          { metadata: { annotations: { [name]: value } } },
        ),
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
