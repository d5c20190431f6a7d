// Daemon replicas as the chart runs them, for the fault cases of issue 30: `keyroll daemon` child
// processes (b-child.ts, so a SIGKILL is a real crash) that elect their leader on a
// coordination.k8s.io/v1 Lease of the real kube-apiserver the test setup starts, reach it through
// a kubeconfig file (`--leader-lease` with $KUBECONFIG, as outside a pod), and share the replay
// records in the chart's ConfigMaps. Election timings are short (Lease 2 s, renew deadline 1.5 s,
// retry 0.25 s; the defaults are 15 s, 10 s, 2 s: the same rules) and every replica sweeps every
// second, so a takeover and its repair take seconds.
import { randomBytes } from 'node:crypto';
import {
  CoordinationV1Api,
  CoreV1Api,
  V1ConfigMap,
  V1Namespace,
  V1ObjectMeta,
} from '@kubernetes/client-node';
import { replayConfigMapName } from '../../src/inbound/replay-records.ts';
import { adminKubeConfig, type KubeApiServerInfo } from '../support/kube-apiserver.ts';
import { waitFor } from '../support/wait-for.ts';
import type { RunningChild } from './b-child.ts';
import type { FaultWorld } from './b-world.ts';

export const LEASE = 'keyroll-leader';
const REPLAY_PREFIX = 'keyroll-replay';

export interface ReplicaCluster {
  namespace: string;
  /** The holder named in the Lease now (undefined: no Lease yet, or released). */
  holder(): Promise<string | undefined>;
  /** Starts `keyroll daemon` as replica `identity` in the world's directory. */
  spawnReplica(identity: string, options?: ReplicaOptions): RunningChild;
}

export interface ReplicaOptions {
  /** KEYROLL_TEST_PAUSE_AT: the replica waits at this rotation step until killed. */
  pauseAt?: string;
  /** More `keyroll daemon` flags (trigger keys, the shared replay store). */
  args?: readonly string[];
  env?: Record<string, string>;
}

/** A fresh namespace with the chart's replay ConfigMaps, and a kubeconfig file in the world's directory. */
export async function openReplicaCluster(
  kube: KubeApiServerInfo,
  world: FaultWorld,
): Promise<ReplicaCluster> {
  const admin = adminKubeConfig(kube);
  const namespace = `keyroll-ha-faults-${randomBytes(4).toString('hex')}`;
  const core = admin.makeApiClient(CoreV1Api);
  const meta = (name: string): V1ObjectMeta => Object.assign(new V1ObjectMeta(), { name });
  await core.createNamespace({ body: Object.assign(new V1Namespace(), { metadata: meta(namespace) }) });
  // What the chart renders for --replay-store kubernetes (templates/replay-store.yaml).
  for (const source of ['trigger', 'github', 'gitguardian'] as const)
    await core.createNamespacedConfigMap({
      namespace,
      body: Object.assign(new V1ConfigMap(), {
        metadata: meta(replayConfigMapName(REPLAY_PREFIX, source)),
        data: {},
      }),
    });
  const kubeconfig = await world.writeFile('kubeconfig.json', admin.exportConfig());
  const leases = admin.makeApiClient(CoordinationV1Api);
  return {
    namespace,
    holder: async () => {
      try {
        const holder = (await leases.readNamespacedLease({ namespace, name: LEASE })).spec?.holderIdentity;
        return holder === undefined || holder === '' ? undefined : holder;
      } catch {
        return undefined;
      }
    },
    spawnReplica: (identity, options = {}) =>
      world.spawn(
        [
          'daemon',
          '-p',
          'policy.yaml',
          '--listen',
          '127.0.0.1:0',
          '--state-dir',
          `state-${identity}`,
          '--replay-store',
          `kubernetes:${namespace}/${REPLAY_PREFIX}`,
          '--check-interval',
          '1s',
          '--retry-failed',
          '1s',
          '--grace',
          '10s',
          '--leader-lease',
          LEASE,
          '--leader-lease-namespace',
          namespace,
          '--leader-identity',
          identity,
          '--lease-duration',
          '2s',
          '--renew-deadline',
          '1500ms',
          '--retry-period',
          '250ms',
          ...(options.args ?? []),
        ],
        {
          env: {
            KUBECONFIG: kubeconfig,
            ...(options.pauseAt === undefined ? {} : { KEYROLL_TEST_PAUSE_AT: options.pauseAt }),
            ...options.env,
          },
          killAfterMs: 120_000,
        },
      ),
  };
}

/** The replica's URL, once it listens (from its `daemon.started` audit event). */
export async function replicaUrl(replica: RunningChild): Promise<string> {
  let listen: string | undefined;
  await waitFor(() => {
    const started = replica.eventsSoFar().find((event) => event.event === 'daemon.started');
    listen = typeof started?.listen === 'string' ? started.listen : undefined;
    return listen !== undefined;
  }, 'the replica listens');
  return `http://${listen ?? ''}`;
}

/** Resolves once the Lease names `identity`. */
export async function untilHolder(cluster: ReplicaCluster, identity: string): Promise<void> {
  await waitFor(async () => (await cluster.holder()) === identity, `${identity} holds the Lease`, {
    intervalMs: 50,
  });
}

/** The events of one kind a replica printed so far. */
export function eventsOf(replica: RunningChild, name: string): Record<string, unknown>[] {
  return replica.eventsSoFar().filter((event) => event.event === name);
}
