// Proof that the holder of a key lock is dead, in Kubernetes (issue 30: a replica SIGKILLed between
// taking a leak's lock and storing the new secret left the leaked key alive for lockTtl). The lock
// is the fence (invariants 5 and 9): nobody takes it over on a guess, because a holder that is
// only paused would store over a newer secret or roll the key a second time. So this answers
// "dead" only on facts the kubelet and the API server give, for an owner of the pod form
// (src/rotation/lock-owner.ts), and "not proven" on anything else: the lock then waits for its
// TTL as before.
//
// The holder is dead when, read from the API server:
// - its pod is gone (GET answers 404), or the name now belongs to a pod with another UID (a
//   StatefulSet reuses names): a pod object is removed only after the kubelet reported all of its
//   containers stopped (graceful deletion), and a process dies with its container;
// - the pod's `keyroll` container was replaced since the holder started: it runs with a
//   `state.running.startedAt` after the holder's start, or it is waiting (crash-loop back-off) or
//   terminated with its last termination finished after the holder's start. The kubelet stamps
//   these times with the node's clock; the holder's start is its own clock, on the same node, so
//   both rules allow the policy's clock skew on top. The API server keeps them in whole seconds,
//   cut off: a container's time reads up to a second early, never late, so the cut errs toward
//   "not proven".
// The limit (docs/daemon.md, "A replica killed holding a leak's lock"): a pod force-deleted
// (`kubectl delete --grace-period=0 --force`, or a Node object deleted while that node is only
// cut off) is gone from the API server while its process may still run; its lock is then taken
// over while it may still act. That is the caveat Kubernetes gives StatefulSets, and the same
// rule holds: never force-delete a keyroll pod whose node is not known to be down.
import { ApiException, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { clientNodeRequest } from '../http/public/client-node-request.ts';
import { parsePodLockOwner, type PodLockOwner } from '../rotation/public/lock-owner.ts';

/** The container of the chart's pods that runs keyroll. */
export const KEYROLL_CONTAINER = 'keyroll';

/** Why the holder is known dead; audited with `key.lock.holder_dead`. */
export type DeathProof =
  | { kind: 'pod-gone'; pod: string }
  | { kind: 'pod-replaced'; pod: string; uid: string }
  | { kind: 'container-restarted'; pod: string; container: string; startedAt: string }
  | { kind: 'container-stopped'; pod: string; container: string; finishedAt: string };

/** The fields of a V1Pod the proof reads (a V1Pod is one; tests write them by hand). */
export interface PodView {
  metadata?: { uid?: string | undefined };
  status?: { containerStatuses?: readonly ContainerStatusView[] | undefined };
}

interface TerminatedView {
  finishedAt?: Date | undefined;
}

export interface ContainerStatusView {
  name: string;
  state?: {
    running?: { startedAt?: Date | undefined } | undefined;
    waiting?: object | undefined;
    terminated?: TerminatedView | undefined;
  };
  lastState?: { terminated?: TerminatedView | undefined } | undefined;
}

/**
 * The verdict on one holder from its pod as read (`undefined`: the API server answered 404).
 * A proof, or undefined when the facts do not prove the holder dead.
 */
export function judgeHolder(
  holder: PodLockOwner,
  pod: PodView | undefined,
  skewMs: number,
  container: string = KEYROLL_CONTAINER,
): DeathProof | undefined {
  const where = `${holder.namespace}/${holder.name}`;
  if (pod === undefined) return { kind: 'pod-gone', pod: where };
  const uid = pod.metadata?.uid;
  if (uid === undefined || uid === '') return undefined;
  if (uid !== holder.uid) return { kind: 'pod-replaced', pod: where, uid };
  const status = pod.status?.containerStatuses?.find((candidate) => candidate.name === container);
  const state = status?.state;
  if (state === undefined) return undefined;
  const after = (time: Date | undefined): time is Date =>
    time !== undefined && !Number.isNaN(time.getTime()) && time.getTime() > holder.startedAtMs + skewMs;
  if (state.running !== undefined) {
    const startedAt = state.running.startedAt;
    return after(startedAt)
      ? { kind: 'container-restarted', pod: where, container, startedAt: startedAt.toISOString() }
      : undefined;
  }
  // Waiting (a restart pending) or terminated: the last termination, if it came after the holder's start.
  const finishedAt = state.terminated?.finishedAt ?? status?.lastState?.terminated?.finishedAt;
  return after(finishedAt)
    ? { kind: 'container-stopped', pod: where, container, finishedAt: finishedAt.toISOString() }
    : undefined;
}

/** Reads one pod; undefined when the API server answers 404. Throws on anything else. */
export type PodReader = (
  namespace: string,
  name: string,
  signal: AbortSignal,
) => Promise<PodView | undefined>;

export interface HolderLivenessOptions {
  readPod: PodReader;
  /** How long one pod read may take (default 5 s); no answer proves nothing. */
  timeoutMs?: number;
  container?: string;
}

/** Proves lock holders dead (rotation's HolderProver). */
export class HolderLiveness {
  readonly #options: HolderLivenessOptions;
  /**
   * A proven death is final (an owner never recurs): remembered, so many keys of one dead holder
   * cost one read. By owner and clock skew: a container-restart proof made with one key's skew is
   * not one for a key that allows its clocks to disagree more.
   */
  readonly #dead = new Map<string, DeathProof>();

  constructor(options: HolderLivenessOptions) {
    this.#options = options;
  }

  /** A proof that `owner` is dead; undefined when not proven (old-form owner, pod alive, API error). */
  async proveDead(owner: string, skewMs: number): Promise<DeathProof | undefined> {
    const remembered = `${String(skewMs)} ${owner}`;
    const known = this.#dead.get(remembered);
    if (known !== undefined) return known;
    const holder = parsePodLockOwner(owner);
    if (holder === undefined) return undefined;
    let pod: PodView | undefined;
    try {
      pod = await this.#options.readPod(
        holder.namespace,
        holder.name,
        AbortSignal.timeout(this.#options.timeoutMs ?? 5_000),
      );
    } catch {
      // No answer, or an error (403 without the Role's `get` on pods): not proven, the lock waits.
      return undefined;
    }
    const proof = judgeHolder(holder, pod, skewMs, this.#options.container);
    if (proof !== undefined) {
      if (this.#dead.size >= 1_000) this.#dead.clear();
      this.#dead.set(remembered, proof);
    }
    return proof;
  }
}

/** A PodReader on the API server of `config` (needs `get` on pods in the holders' namespace). */
export function kubePodReader(config: KubeConfig): PodReader {
  const api = config.makeApiClient(CoreV1Api);
  return async (namespace, name, signal) => {
    try {
      return await api.readNamespacedPod({ namespace, name }, clientNodeRequest(signal));
    } catch (error) {
      if (error instanceof ApiException && error.code === 404 && isPodNotFound(error.body, name))
        return undefined;
      throw error;
    }
  };
}

/**
 * A 404 proves the pod gone only when the API server itself says so (a Status `NotFound` naming
 * this pod): a 404 from a proxy in the way, or for a wrong path, proves nothing.
 */
export function isPodNotFound(body: unknown, name: string): boolean {
  let status: unknown = body;
  if (typeof body === 'string') {
    try {
      status = JSON.parse(body);
    } catch {
      return false;
    }
  }
  if (typeof status !== 'object' || status === null) return false;
  const { kind, reason, details } = status as { kind?: unknown; reason?: unknown; details?: unknown };
  if (kind !== 'Status' || reason !== 'NotFound' || typeof details !== 'object' || details === null)
    return false;
  const named = details as { name?: unknown; kind?: unknown };
  return named.kind === 'pods' && named.name === name;
}
