// A StatefulSet (apps/v1). Its rollout is complete, as `kubectl rollout status` reads it, once the
// controller observed the restart, every replica is ready and the update revision is current (or,
// with a partition, the replicas above it are updated). Under the OnDelete strategy a restart
// replaces no pod until someone deletes it: reported as a rollout that cannot complete on its own.
import { ConsumerError } from '../errors.ts';
import { observedLatest, specOf, statusOf, type WorkloadKindSpec } from './workload-kind.ts';

export const STATEFUL_SET: WorkloadKindSpec = {
  kind: 'statefulSet',
  resource: { group: 'apps', version: 'v1', plural: 'statefulsets' },
  kubectl: 'statefulset',
  rollout(object) {
    const spec = specOf(object);
    if (spec.updateStrategy?.type === 'OnDelete') {
      return {
        failed: new ConsumerError(
          'KR_CONSUMER_ROLLOUT_FAILED',
          'its update strategy is OnDelete: the restart replaces a pod only when the pod is deleted',
        ),
      };
    }
    if (!observedLatest(object))
      return { waiting: 'waiting for the statefulset controller to observe the restart' };
    const status = statusOf(object);
    const wanted = spec.replicas ?? 1;
    if ((status.readyReplicas ?? 0) < wanted)
      return { waiting: `${String(status.readyReplicas ?? 0)} of ${String(wanted)} replicas ready` };
    const partition = spec.updateStrategy?.rollingUpdate?.partition ?? 0;
    if (partition > 0) {
      const due = wanted - partition;
      return (status.updatedReplicas ?? 0) < due
        ? {
            waiting: `${String(status.updatedReplicas ?? 0)} of ${String(due)} replicas above the partition updated`,
          }
        : { done: true };
    }
    if (status.updateRevision !== status.currentRevision)
      return {
        waiting: `${String(status.updatedReplicas ?? 0)} of ${String(wanted)} replicas at the new revision`,
      };
    return { done: true };
  },
};
