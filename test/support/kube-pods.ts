// Pod objects of keyroll replicas on a kube-apiserver with no kubelet (the tests' and the benches'):
// the test creates a replica's Pod and writes the status of its `keyroll` container through
// /status, as the kubelet of its node would: running since a time, or stopped (the container
// killed, a restart pending). What src/leader/holder-liveness.ts reads to prove a holder dead.
import { ApiException, type CoreV1Api, type V1ContainerState, type V1Pod } from '@kubernetes/client-node';
import { createUnlessExists } from './kube-apiserver.ts';

const IMAGE = 'keyroll:test';
const IMAGE_ID = `keyroll@sha256:${'0'.repeat(64)}`;

/** Creates the Pod `name` (or keeps the one there), its keyroll container running since `startedAt`; its UID. */
export async function startKeyrollPod(
  core: CoreV1Api,
  namespace: string,
  name: string,
  startedAt: Date,
): Promise<string> {
  let pod: V1Pod;
  let restartCount = 0;
  // The namespace's `default` ServiceAccount, which the API server's admission needs before it
  // admits a pod (the controller-manager creates it in a cluster; none runs here).
  await createUnlessExists(() =>
    core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'default' } } }),
  );
  try {
    pod = await core.createNamespacedPod({
      namespace,
      body: { metadata: { name }, spec: { containers: [{ name: 'keyroll', image: IMAGE }] } },
    });
  } catch (error) {
    // The container restarts in its pod (same name, same UID): the kubelet counts the restart.
    if (!(error instanceof ApiException && error.code === 409)) throw error;
    pod = await core.readNamespacedPod({ namespace, name });
    restartCount = (pod.status?.containerStatuses?.[0]?.restartCount ?? 0) + 1;
  }
  return writeKeyrollContainer(core, pod, { running: { startedAt } }, { restartCount });
}

/** The keyroll container killed at `finishedAt`, its restart pending (the kubelet's CrashLoopBackOff). */
export async function stopKeyrollContainer(
  core: CoreV1Api,
  namespace: string,
  name: string,
  finishedAt: Date,
): Promise<void> {
  const pod = await core.readNamespacedPod({ namespace, name });
  const previous = pod.status?.containerStatuses?.[0];
  await writeKeyrollContainer(
    core,
    pod,
    { waiting: { reason: 'CrashLoopBackOff' } },
    {
      restartCount: previous?.restartCount ?? 0,
      lastTerminated: {
        exitCode: 137,
        reason: 'Error',
        finishedAt,
        ...(previous?.state?.running?.startedAt ? { startedAt: previous.state.running.startedAt } : {}),
      },
    },
  );
}

/** Writes the keyroll container's state through /status; the pod's UID. */
export async function setKeyrollContainer(
  core: CoreV1Api,
  namespace: string,
  name: string,
  state: V1ContainerState,
  options: ContainerOptions = {},
): Promise<string> {
  return writeKeyrollContainer(core, await core.readNamespacedPod({ namespace, name }), state, options);
}

interface ContainerOptions {
  restartCount?: number;
  lastTerminated?: NonNullable<V1ContainerState['terminated']>;
}

/** Writes the keyroll container's state into `pod` (as just read or created) through /status; its UID. */
async function writeKeyrollContainer(
  core: CoreV1Api,
  pod: V1Pod,
  state: V1ContainerState,
  options: ContainerOptions,
): Promise<string> {
  const namespace = pod.metadata?.namespace ?? '';
  const name = pod.metadata?.name ?? '';
  const running = state.running !== undefined;
  const status = pod.status ?? {};
  status.phase = 'Running';
  status.containerStatuses = [
    {
      name: 'keyroll',
      image: IMAGE,
      imageID: IMAGE_ID,
      ready: running,
      started: running,
      restartCount: options.restartCount ?? 0,
      state,
      ...(options.lastTerminated ? { lastState: { terminated: options.lastTerminated } } : {}),
    },
  ];
  pod.status = status;
  const replaced = await core.replaceNamespacedPodStatus({ namespace, name, body: pod });
  return replaced.metadata?.uid ?? '';
}
