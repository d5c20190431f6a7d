// Whether a restart recorded as owed on a workload (markers.ts) still counts. The annotation is a
// claim anyone who may edit the workload can write, and one the deployment controller and
// `kubectl rollout undo` copy around (markers.ts), so keyroll acts on an entry only when all of
// these hold (docs/kubernetes.md, "Restart debts"):
// - its key is in the policy and lists this workload (an entry naming another key would make
//   keyroll sync that key's ExternalSecrets and alert about it: forged);
// - its store time is not in the future (a sync after it could never come: forged);
// - its rotation is the key's last one, as the key's record in the backend says (an id the record
//   never knew is forged; an older rotation is superseded: the newer one's delivery restarts it);
// - the workload was not restarted for it already (restarted-for);
// - the pods did not roll since the entry was written (markers.ts rolloutOf moved): pods started
//   since then read the value, unless its syncs had not happened yet (the caller checks those).
// Forged entries are settled (removed) and audited as such; so are the other entries that no
// longer count. Nothing here reads the cluster or a backend: the caller hands in what it read.
import type { KeyPolicy } from '../policy/public/schema.ts';
import type { KubeObject } from './kubernetes/client.ts';
import { restartedFor, rolloutOf, type OwedRestart } from './markers.ts';
import { WORKLOAD_KINDS } from './kinds/workloads.ts';
import { consumerKey, type WorkloadConsumer } from './refs.ts';

/** What the key's record says of its last rotation, as far as keyroll trusts it (rotation/trusted-state.ts). */
export interface KeyRecord {
  lastRotationId?: string | undefined;
  lastRotatedAt?: string | undefined;
}

/** Why an entry is forged: keyroll never writes one like it. */
export type ForgedWhy = 'not-a-consumer' | 'future' | 'unknown-rotation';
/** Why a genuine-looking entry no longer counts. */
export type SettledWhy = 'superseded' | 'already-restarted' | 'rolled-since';

export type OwedVerdict =
  /** It counts: the restart is still owed. */
  | { kind: 'owed' }
  /** The pod template rolled since a runner wrote it before its syncs: owed only while a sync it waits for has not shown the value. */
  | { kind: 'rolled' }
  | { kind: 'settle'; why: SettledWhy }
  | { kind: 'forged'; why: ForgedWhy }
  /** Not keyroll's to judge now: a key outside this policy (another installation's), or a record that could not be read. Left as it is. */
  | { kind: 'unjudged' };

export interface OwedContext {
  workload: WorkloadConsumer;
  object: KubeObject;
  key: KeyPolicy | undefined;
  /** The key's record; 'unreadable' when the backend could not be read now. */
  record: KeyRecord | 'unreadable';
  nowMs: number;
}

export function judgeOwed(entry: OwedRestart, context: OwedContext): OwedVerdict {
  const { key, record, object } = context;
  if (key === undefined || key.id !== entry.keyId) return { kind: 'unjudged' };
  const workloadKey = consumerKey(context.workload);
  if (!(key.consumers ?? []).some((consumer) => consumerKey(consumer) === workloadKey))
    return { kind: 'forged', why: 'not-a-consumer' };
  const storedAtMs = Date.parse(entry.storedAt);
  // The runner that wrote it may run on a clock ahead of this one by the policy's clockSkew.
  if (storedAtMs > context.nowMs + key.clockSkewMs) return { kind: 'forged', why: 'future' };
  if (record === 'unreadable') return { kind: 'unjudged' };
  if (record.lastRotationId !== entry.rotationId) {
    const lastMs = record.lastRotatedAt === undefined ? Number.NaN : Date.parse(record.lastRotatedAt);
    return storedAtMs < lastMs
      ? { kind: 'settle', why: 'superseded' }
      : { kind: 'forged', why: 'unknown-rotation' };
  }
  if (restartedFor(object).includes(entry.rotationId)) return { kind: 'settle', why: 'already-restarted' };
  const rollout = rolloutOf(WORKLOAD_KINDS[context.workload.kind].resource.plural, object);
  if (entry.rollout !== undefined && rollout !== undefined && rollout > entry.rollout) {
    // A deferred entry was written after its syncs: whatever rolled the pods since started them on the value.
    return entry.deferred === true ? { kind: 'settle', why: 'rolled-since' } : { kind: 'rolled' };
  }
  return { kind: 'owed' };
}
