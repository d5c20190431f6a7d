// What differs between the workloads keyroll restarts: where the object lives, kubectl's name
// for it, and when its rollout is complete. One file per kind (deployment.ts, stateful-set.ts,
// daemon-set.ts); the restart itself is the same for all (workload.ts).
import type { WorkloadKind } from '../../policy/public/consumers.ts';
import type { KubeObject } from '../kubernetes/client.ts';
import type { Verdict } from '../wait.ts';

export interface WorkloadKindSpec {
  kind: WorkloadKind;
  resource: { group: string; version: string; plural: string };
  /** kubectl's resource name: `kubectl rollout restart <kubectl>/<name>`. */
  kubectl: string;
  /** The rollout's state, read as `kubectl rollout status` reads it. */
  rollout(object: KubeObject): Verdict<true>;
}

/** The fields of a workload's status and spec the rollout checks read; all optional (tolerant parsing). */
export interface WorkloadStatus {
  observedGeneration?: number;
  replicas?: number;
  updatedReplicas?: number;
  availableReplicas?: number;
  readyReplicas?: number;
  currentRevision?: string;
  updateRevision?: string;
  desiredNumberScheduled?: number;
  updatedNumberScheduled?: number;
  numberAvailable?: number;
  conditions?: { type?: string; status?: string; reason?: string; message?: string }[];
}

export interface WorkloadSpecFields {
  replicas?: number;
  updateStrategy?: { type?: string; rollingUpdate?: { partition?: number } };
}

export function statusOf(object: KubeObject): WorkloadStatus {
  return typeof object.status === 'object' && object.status !== null ? object.status : {};
}

export function specOf(object: KubeObject): WorkloadSpecFields {
  return typeof object.spec === 'object' && object.spec !== null ? object.spec : {};
}

/** The controller has seen the latest change of the spec (the restart). */
export function observedLatest(object: KubeObject): boolean {
  const generation = object.metadata?.generation ?? 0;
  const observed = statusOf(object).observedGeneration ?? 0;
  return observed >= generation && observed > 0;
}
