// One delivery's work, coalesced (invariant 12): each ExternalSecret (or VaultStaticSecret) once, synced after the latest
// store among the values it carries; each workload once, owed every rotation of the keys that list
// it, after every sync those keys list. Consumers come in the order the policy lists them (keys in
// policy order, then each key's consumers in order): that is the order workloads restart in.
import type { KeyPolicy } from '../policy/public/schema.ts';
import type { KubeConsumerRef, SyncingConsumer, WorkloadConsumer } from './refs.ts';
import { consumerKey, isSyncing, isWorkload } from './refs.ts';
import type { StoredValue } from './types.ts';

export interface SyncTarget {
  consumer: SyncingConsumer;
  values: StoredValue[];
  /** The latest store among them: a sync must come after it. */
  storedAtMs: number;
}

export interface RestartTarget {
  consumer: WorkloadConsumer;
  values: StoredValue[];
  /** The ExternalSecrets and VaultStaticSecrets (consumerKey) whose sync comes before the restart. */
  syncs: string[];
  urgent: boolean;
}

export interface DeliveryPlan {
  syncs: SyncTarget[];
  restarts: RestartTarget[];
}

/**
 * `values` in any order; `policyOrder` gives each key id its place. `only` (owed restarts picked
 * up) limits each workload to the rotations it was found owed, and the syncs to those such a
 * restart waits for: a value no listed workload is owed syncs nothing (an owed entry is a claim
 * written on a workload, not a reason to sync every ExternalSecret of its key: owed.ts).
 */
export function planDelivery(
  values: readonly StoredValue[],
  policyOrder: ReadonlyMap<string, number>,
  only?: ReadonlyMap<string, ReadonlySet<string>>,
): DeliveryPlan {
  const ordered = [...values].sort(
    (a, b) =>
      (policyOrder.get(a.key.id) ?? Number.MAX_SAFE_INTEGER) -
      (policyOrder.get(b.key.id) ?? Number.MAX_SAFE_INTEGER),
  );
  const syncs = new Map<string, SyncTarget>();
  const restarts = new Map<string, RestartTarget>();
  for (const value of ordered) {
    const consumers: readonly KubeConsumerRef[] = (value.key.consumers ?? []).filter(
      (c): c is KubeConsumerRef => c.kind !== 'webhook',
    );
    const keySyncs = consumers.filter(isSyncing).map(consumerKey);
    const restartsIt =
      only === undefined ||
      consumers.some(
        (consumer) => isWorkload(consumer) && only.get(consumerKey(consumer))?.has(value.rotationId) === true,
      );
    for (const consumer of consumers) {
      const key = consumerKey(consumer);
      if (isSyncing(consumer)) {
        if (!restartsIt) continue;
        const target = syncs.get(key) ?? { consumer, values: [], storedAtMs: 0 };
        target.values.push(value);
        target.storedAtMs = Math.max(target.storedAtMs, value.storedAtMs);
        syncs.set(key, target);
      } else if (isWorkload(consumer)) {
        if (only !== undefined && only.get(key)?.has(value.rotationId) !== true) continue;
        const target = restarts.get(key) ?? { consumer, values: [], syncs: [], urgent: false };
        target.values.push(value);
        target.urgent ||= value.urgency === 'now';
        for (const sync of keySyncs) if (!target.syncs.includes(sync)) target.syncs.push(sync);
        restarts.set(key, target);
      }
    }
  }
  return { syncs: [...syncs.values()], restarts: [...restarts.values()] };
}

/** Each key id's place in the policy: consumers restart in the order the policy lists them. */
export function policyOrder(keys: readonly KeyPolicy[]): Map<string, number> {
  return new Map(keys.map((key, index) => [key.id, index]));
}
