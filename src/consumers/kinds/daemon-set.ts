// A DaemonSet (apps/v1). Its rollout is complete, as `kubectl rollout status` reads it, once the
// controller observed the restart and the updated pods are scheduled and available on every node
// that should run one. Under the OnDelete strategy a restart replaces no pod on its own.
import { ConsumerError } from '../errors.ts';
import { observedLatest, specOf, statusOf, type WorkloadKindSpec } from './workload-kind.ts';

export const DAEMON_SET: WorkloadKindSpec = {
  kind: 'daemonSet',
  resource: { group: 'apps', version: 'v1', plural: 'daemonsets' },
  kubectl: 'daemonset',
  rollout(object) {
    if (specOf(object).updateStrategy?.type === 'OnDelete') {
      return {
        failed: new ConsumerError(
          'KR_CONSUMER_ROLLOUT_FAILED',
          'its update strategy is OnDelete: the restart replaces a pod only when the pod is deleted',
        ),
      };
    }
    if (!observedLatest(object))
      return { waiting: 'waiting for the daemonset controller to observe the restart' };
    const status = statusOf(object);
    const desired = status.desiredNumberScheduled ?? 0;
    if ((status.updatedNumberScheduled ?? 0) < desired)
      return {
        waiting: `${String(status.updatedNumberScheduled ?? 0)} of ${String(desired)} updated pods scheduled`,
      };
    if ((status.numberAvailable ?? 0) < desired)
      return {
        waiting: `${String(status.numberAvailable ?? 0)} of ${String(desired)} updated pods available`,
      };
    return { done: true };
  },
};
