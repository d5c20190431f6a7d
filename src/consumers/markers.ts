// What keyroll writes on a workload besides the restart itself, as annotations any person can read
// with kubectl:
//   keyroll.io/restart-owed   the rotations whose value the workload must still be restarted for
//                             (JSON), written before the syncs it waits for: a runner that dies
//                             in between leaves them for the next run or sweep to pick up, and a
//                             restart that waits for the restart window stays recorded here;
//   keyroll.io/restarted-for  the rotations the latest restarts were for (the last 32 ids),
//                             written with the restart in one patch under the object's
//                             resourceVersion: two runners never restart a workload twice for the
//                             same rotation (invariant 12).
// Both ride along wherever the workload's annotations go: the deployment controller copies a
// Deployment's annotations onto its newest ReplicaSet (copyDeploymentAnnotationsToReplicaSet) and
// `kubectl rollout undo` copies an old ReplicaSet's back (getDeploymentPatch), as can any person
// with a manifest. So an owed entry is a claim, never a proof: owed.ts judges each against the
// key's record, the policy and the workload's rollouts before anything acts on it.
import type { KubeObject } from './kubernetes/client.ts';

export const RESTART_OWED = 'keyroll.io/restart-owed';
export const RESTARTED_FOR = 'keyroll.io/restarted-for';
/** What `kubectl rollout restart` sets on the pod template (a change of it rolls the pods). */
export const RESTARTED_AT = 'kubectl.kubernetes.io/restartedAt';
/** Rotation ids kept in restarted-for: far more than one run or sweep rotates keys of one workload. */
export const RESTARTED_FOR_KEPT = 32;

/** One rotation a workload is owed a restart for. */
export interface OwedRestart {
  rotationId: string;
  keyId: string;
  /** The value its consumers held died: the restart ignores the restart window. */
  urgent: boolean;
  /** ISO-8601: when the value was stored (its ExternalSecrets must show a sync after it). */
  storedAt: string;
  /** Set when a runner left it for the restart window (not in progress any more). */
  deferred?: boolean;
  /**
   * The workload's rollout count when the entry was written (for a deferred one: when it was left,
   * after its syncs): rolloutOf. A later count means the pods rolled since. Absent on entries
   * written before keyroll kept it, and on a Deployment no deployment controller numbered yet.
   */
  rollout?: number;
}

function annotations(object: KubeObject): Record<string, string> {
  return object.metadata?.annotations ?? {};
}

/** The owed restarts recorded on the workload; an annotation keyroll cannot read counts as none. */
export function owedRestarts(object: KubeObject): OwedRestart[] {
  const text = annotations(object)[RESTART_OWED];
  if (text === undefined || text === '') return [];
  try {
    const parsed: unknown = JSON.parse(text);
    if (!Array.isArray(parsed)) return [];
    return parsed.filter(isOwedRestart);
  } catch {
    return [];
  }
}

function isOwedRestart(value: unknown): value is OwedRestart {
  if (typeof value !== 'object' || value === null) return false;
  const entry = value as Record<string, unknown>;
  return (
    typeof entry.rotationId === 'string' &&
    typeof entry.keyId === 'string' &&
    typeof entry.urgent === 'boolean' &&
    typeof entry.storedAt === 'string' &&
    !Number.isNaN(Date.parse(entry.storedAt)) &&
    (entry.rollout === undefined ||
      (typeof entry.rollout === 'number' && Number.isSafeInteger(entry.rollout)))
  );
}

/** The annotation the deployment controller numbers a Deployment's rollouts with (its newest ReplicaSet's revision). */
export const DEPLOYMENT_REVISION = 'deployment.kubernetes.io/revision';

/**
 * A count that moves when, and only when, the workload's pods roll (a restart, a deploy, an undo),
 * and that nobody's copy of annotations or of a pod template takes back: a Deployment's revision
 * (the controller gives every new or reused ReplicaSet the next one, an undo included, and
 * neither copies it: annotationsToSkip), a StatefulSet's or DaemonSet's metadata.generation (only
 * a change of the spec moves it). Not a Deployment's generation: any change of its annotations
 * moves that one (they are copied to its ReplicaSets), keyroll's own markers included. Undefined
 * for a Deployment without a revision.
 */
export function rolloutOf(plural: string, object: KubeObject): number | undefined {
  if (plural !== 'deployments') return object.metadata?.generation;
  const revision = Number(object.metadata?.annotations?.[DEPLOYMENT_REVISION]);
  return Number.isSafeInteger(revision) && revision > 0 ? revision : undefined;
}

/** The rotation ids the workload's latest restarts were for, oldest first. */
export function restartedFor(object: KubeObject): string[] {
  const text = annotations(object)[RESTARTED_FOR];
  return text === undefined || text === '' ? [] : text.split(',').filter((id) => id !== '');
}

/** The annotation value of `owed`, or null (a merge patch's way to remove it) when nothing is owed. */
export function owedAnnotation(owed: readonly OwedRestart[]): string | null {
  return owed.length === 0 ? null : JSON.stringify(owed);
}

/** restarted-for after a restart for `ids`: the older ids first, the newest last, at most RESTARTED_FOR_KEPT. */
export function restartedForAnnotation(before: readonly string[], ids: readonly string[]): string {
  const kept = [...before.filter((id) => !ids.includes(id)), ...ids];
  return kept.slice(-RESTARTED_FOR_KEPT).join(',');
}
