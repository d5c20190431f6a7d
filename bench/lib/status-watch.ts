// The bench's own watch of RotatedKeys (bench/crd-daemon.ts), straight to the API server as the
// admin, not through the counting front: when each object first carried a status, when it was
// first Ready=True, and each change of a status the watch saw (a cross-check of the front's count
// of status patches: a write that changes nothing is not sent, one that changes something is one
// new resourceVersion with a different status).
import { createMemoryAuditLog } from '../../src/audit/logger.ts';
import { KubeResourceClient } from '../../src/crd/watch/kube-client.ts';
import { Reflector, type WatchChange } from '../../src/crd/watch/reflector.ts';
import type { WatchedObject } from '../../src/crd/watch/resource.ts';
import { adminKubeConfig, type KubeApiServerInfo } from '../../test/support/kube-apiserver.ts';

interface Condition {
  type?: string;
  status?: string;
  reason?: string;
}

export interface KeyStatusView {
  conditions?: Condition[];
  lastRotated?: string;
  lastRotationId?: string;
  rotateNow?: { value?: string; outcome?: string };
}

export interface StatusWatch {
  /** performance.now() when the watch first saw a non-empty status on `namespace/name`. */
  firstStatusAt: Map<string, number>;
  /** performance.now() when the watch first saw Ready=True on it. */
  firstReadyAt: Map<string, number>;
  /** Status changes seen per object (each a status that differs from the one before). */
  statusChanges: Map<string, number>;
  object(key: string): WatchedObject | undefined;
  status(key: string): KeyStatusView | undefined;
  stop(): Promise<void>;
}

export function statusOf(object: WatchedObject | undefined): KeyStatusView | undefined {
  const status = object?.status;
  return typeof status === 'object' && status !== null && Object.keys(status).length > 0 ? status : undefined;
}

export function condition(status: KeyStatusView | undefined, type: string): Condition | undefined {
  return status?.conditions?.find((c) => c.type === type);
}

export async function startStatusWatch(kube: KubeApiServerInfo): Promise<StatusWatch> {
  const firstStatusAt = new Map<string, number>();
  const firstReadyAt = new Map<string, number>();
  const statusChanges = new Map<string, number>();
  const seen = (change: WatchChange): void => {
    if (change.type === 'deleted') return;
    const at = performance.now();
    const status = statusOf(change.object);
    if (status === undefined) return;
    if (!firstStatusAt.has(change.key)) firstStatusAt.set(change.key, at);
    if (!firstReadyAt.has(change.key) && condition(status, 'Ready')?.status === 'True')
      firstReadyAt.set(change.key, at);
    const before = change.type === 'modified' ? JSON.stringify(change.previous.status ?? {}) : '{}';
    if (JSON.stringify(status) !== before)
      statusChanges.set(change.key, (statusChanges.get(change.key) ?? 0) + 1);
  };
  const reflector = new Reflector({
    requests: new KubeResourceClient(adminKubeConfig(kube)),
    resource: { group: 'keyroll.io', version: 'v1alpha1', plural: 'rotatedkeys' },
    audit: createMemoryAuditLog(),
    onChange: seen,
  });
  const controller = new AbortController();
  const running = reflector.run(controller.signal);
  await reflector.synced;
  return {
    firstStatusAt,
    firstReadyAt,
    statusChanges,
    object: (key) => reflector.get(key),
    status: (key) => statusOf(reflector.get(key)),
    stop: async () => {
      controller.abort();
      await running;
    },
  };
}
