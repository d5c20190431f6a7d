// A Deployment (apps/v1). Its rollout is complete, as `kubectl rollout status` reads it, once the
// controller observed the restart and every replica is updated and available, with no old replica
// left; a Progressing condition with reason ProgressDeadlineExceeded means it will not complete.
import { ConsumerError } from '../errors.ts';
import { observedLatest, specOf, statusOf, type WorkloadKindSpec } from './workload-kind.ts';

export const DEPLOYMENT: WorkloadKindSpec = {
  kind: 'deployment',
  resource: { group: 'apps', version: 'v1', plural: 'deployments' },
  kubectl: 'deployment',
  rollout(object) {
    if (!observedLatest(object))
      return { waiting: 'waiting for the deployment controller to observe the restart' };
    const status = statusOf(object);
    const progressing = status.conditions?.find((condition) => condition.type === 'Progressing');
    if (progressing?.reason === 'ProgressDeadlineExceeded') {
      return {
        failed: new ConsumerError(
          'KR_CONSUMER_ROLLOUT_FAILED',
          `the rollout exceeded its progress deadline${progressing.message === undefined ? '' : `: ${progressing.message}`}`,
        ),
      };
    }
    const wanted = specOf(object).replicas ?? 1;
    const updated = status.updatedReplicas ?? 0;
    if (updated < wanted) return { waiting: `${String(updated)} of ${String(wanted)} replicas updated` };
    if ((status.replicas ?? 0) > updated)
      return { waiting: `${String((status.replicas ?? 0) - updated)} old replicas pending termination` };
    if ((status.availableReplicas ?? 0) < updated)
      return {
        waiting: `${String(status.availableReplicas ?? 0)} of ${String(updated)} updated replicas available`,
      };
    return { done: true };
  },
};
