// The status writer of the objects mode (issue 31, docs/crds.md "Status"): crd/controller's
// StatusReporter, given what only the daemon holds: the RotatedKeys as its watch sees them, the
// key entries and stores of the generation in force (to read a key's record as the sweep does),
// and the launcher, through which a `keyroll.io/rotate-now` request is rotated as a leak report
// or a trigger is (Launcher.runOne: the key's lock, its minInterval rule, one run at a time).
// Built lazily from the daemon's getters, so a reload's new generation is the one asked.
import { randomUUID } from 'node:crypto';
import type { AuditLog } from '../audit/public/events.ts';
import { KubeAnnotationClient } from '../crd/public/controller/annotation-client.ts';
import { StatusReporter } from '../crd/public/controller/reporter.ts';
import { rotateNowTrigger } from '../crd/public/controller/rotate-now.ts';
import { GROUP, VERSION } from '../crd/public/kinds/common.ts';
import { KubeResourceClient } from '../crd/public/watch/kube-client.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { readTrustedState } from '../rotation/public/trusted-state.ts';
import type { Generation } from '../scheduler/public/generation.ts';
import type { Launcher } from '../scheduler/public/launcher.ts';
import type { KeysFromObjects, ObjectKeys } from './object-keys.ts';

export interface ObjectStatusDeps {
  keysFrom: KeysFromObjects;
  objects: ObjectKeys;
  audit: AuditLog;
  now: () => Date;
  /** The generation in force when asked. */
  generation: () => Generation;
  launcher: () => Launcher;
}

/** A key that left the generation between the reporter's decision and its read: nothing to read. */
class KeyGoneError extends Error {}

export function objectStatusReporter(deps: ObjectStatusDeps): StatusReporter {
  const keyOf = (keyId: string): KeyPolicy | undefined =>
    deps.generation().policy.keys.find((key) => key.id === keyId);
  const inForce = (keyId: string): { generation: Generation; key: KeyPolicy } => {
    const generation = deps.generation();
    const key = generation.policy.keys.find((entry) => entry.id === keyId);
    if (key === undefined) throw new KeyGoneError(`key ${keyId} is not in the policy in force`);
    return { generation, key };
  };
  return new StatusReporter({
    requests: new KubeResourceClient(deps.keysFrom.kubeConfig),
    resource: { group: GROUP, version: VERSION, plural: 'rotatedkeys' },
    objects: deps.objects.rotatedKeys(),
    keyPolicy: keyOf,
    readTrustedState: async (keyId) => {
      const { generation, key } = inForce(keyId);
      return readTrustedState(generation.runtime.resolveKey(key).primary, key, deps.now());
    },
    audit: deps.audit,
    now: deps.now,
    rotateNow: {
      port: async (keyId, call) => {
        const { generation, key } = inForce(keyId);
        return deps.launcher().runOne(generation, key, rotateNowTrigger(call), randomUUID());
      },
      annotations: new KubeAnnotationClient(deps.keysFrom.kubeConfig),
    },
  });
}
