// The owner string a runner writes into every key lock it takes (LockInfo.owner: stored by the
// file, Vault and AWS backends, shown in `status` and the audit trail). One string, built and read
// only here.
//
// Outside Kubernetes it is `host/pid/random`, as always. In a pod (POD_NAMESPACE, POD_NAME and
// POD_UID from the downward API) it also names what a proof of the holder's death needs
// (src/leader/holder-liveness.ts): `pod:<namespace>/<name>/<uid>/<process start, ISO-8601>/<pid>/<random>`.
// Namespaces, pod names (DNS subdomains) and UIDs never contain `/`, and an ISO time never does,
// so the fields split back unambiguously. `random` keeps two processes of one pod apart, and
// makes an owner never recur: a proven-dead owner stays dead, whoever holds a lock later.
// An owner of the old form, or one that does not parse, is never proven dead (the lock waits for
// its TTL, as before).
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';

/** The holder a pod-form owner names. */
export interface PodLockOwner {
  namespace: string;
  name: string;
  uid: string;
  /** When the holder's process started, by its own clock (ms since the epoch). */
  startedAtMs: number;
  pid: number;
}

const POD_PREFIX = 'pod:';
/** DNS label / subdomain characters, and the UID's (hex and dashes). */
const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const UID = /^[0-9a-fA-F-]{1,64}$/;

/** The pod this process runs in, from the downward API; undefined outside a pod (or without POD_UID). */
export function podIdentityOf(
  env: NodeJS.ProcessEnv,
): Pick<PodLockOwner, 'namespace' | 'name' | 'uid'> | undefined {
  const namespace = env.POD_NAMESPACE;
  const name = env.POD_NAME;
  const uid = env.POD_UID;
  if (namespace === undefined || name === undefined || uid === undefined) return undefined;
  if (!NAME.test(namespace) || !NAME.test(name) || !UID.test(uid)) return undefined;
  return { namespace, name, uid };
}

/**
 * This process's lock owner: the pod form in a pod, else `host/pid/random`. The start time is
 * the process's own (performance.timeOrigin): the proof compares it with the times the kubelet of
 * the same node stamps on the container.
 */
export function lockOwnerOf(env: NodeJS.ProcessEnv, startedAtMs: number = performance.timeOrigin): string {
  const random = randomBytes(4).toString('hex');
  const pod = podIdentityOf(env);
  if (pod === undefined) return `${hostname()}/${String(process.pid)}/${random}`;
  const started = new Date(Math.floor(startedAtMs)).toISOString();
  return `${POD_PREFIX}${pod.namespace}/${pod.name}/${pod.uid}/${started}/${String(process.pid)}/${random}`;
}

/** The holder a lock owner names, when it is of the pod form; undefined for any other owner. */
export function parsePodLockOwner(owner: string): PodLockOwner | undefined {
  if (!owner.startsWith(POD_PREFIX)) return undefined;
  const parts = owner.slice(POD_PREFIX.length).split('/');
  if (parts.length !== 6) return undefined;
  const [namespace, name, uid, started, pid, random] = parts as [
    string,
    string,
    string,
    string,
    string,
    string,
  ];
  if (!NAME.test(namespace) || !NAME.test(name) || !UID.test(uid) || random === '') return undefined;
  // Only the exact form lockOwnerOf writes: anything looser could be a forged or mangled owner.
  const startedAtMs = Date.parse(started);
  if (Number.isNaN(startedAtMs) || new Date(startedAtMs).toISOString() !== started) return undefined;
  if (!/^[1-9][0-9]{0,9}$/.test(pid)) return undefined;
  return { namespace, name, uid, startedAtMs, pid: Number(pid) };
}
