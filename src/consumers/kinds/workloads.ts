// Every workload kind keyroll restarts, by its policy name: a new kind without an entry here
// fails the type check.
import type { WorkloadKind } from '../../policy/public/consumers.ts';
import type { KubeObjectRef } from '../kubernetes/client.ts';
import { DAEMON_SET } from './daemon-set.ts';
import { DEPLOYMENT } from './deployment.ts';
import { STATEFUL_SET } from './stateful-set.ts';
import type { WorkloadKindSpec } from './workload-kind.ts';

export const WORKLOAD_KINDS: Readonly<Record<WorkloadKind, WorkloadKindSpec>> = {
  deployment: DEPLOYMENT,
  statefulSet: STATEFUL_SET,
  daemonSet: DAEMON_SET,
};

export function workloadRef(kind: WorkloadKind, namespace: string, name: string): KubeObjectRef {
  return { ...WORKLOAD_KINDS[kind].resource, namespace, name };
}
