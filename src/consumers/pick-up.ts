// Finding the restarts still owed on the workloads a policy lists (refresher.ts pickUpOwed): each
// workload is read, each entry judged (owed.ts) against the policy and the key's record, the
// entries that no longer count are settled (removed from the workload) and audited, and those that
// count and are due are handed back for delivery. Read failures are left for the next run or sweep.
import type { AuditLog } from '../audit/public/events.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { mapWithConcurrency } from '../rotation/public/concurrency.ts';
import { ExternalSecretApi } from './kinds/external-secret-api.ts';
import { showsSyncAfter } from './kinds/external-secret.ts';
import { settleOwed } from './kinds/workload.ts';
import { workloadRef } from './kinds/workloads.ts';
import type { KubeClient, KubeObject } from './kubernetes/client.ts';
import { owedRestarts, type OwedRestart } from './markers.ts';
import { judgeOwed, type KeyRecord, type OwedVerdict } from './owed.ts';
import {
  consumerKey,
  consumerName,
  isExternalSecret,
  isVaultStaticSecret,
  isWorkload,
  type WorkloadConsumer,
} from './refs.ts';

/** The key's record in its primary destination (trusted-state.ts); throws when it cannot be read now. */
export type KeyRecords = (key: KeyPolicy) => Promise<KeyRecord>;

export interface OwedOnWorkload {
  workload: WorkloadConsumer;
  owed: OwedRestart[];
}

export interface FindOwedOptions {
  keys: readonly KeyPolicy[];
  records: KeyRecords;
  nowMs: number;
  /** Whether a counting entry is due now (stale, or left for a window that is open). */
  due: (entry: OwedRestart) => boolean;
  audit: AuditLog;
  signal?: AbortSignal | undefined;
  /** Requests at once (workload reads, ExternalSecret reads, settles). */
  parallel: number;
}

/** The entries that count and are due, by workload; settles and audits the others. Never throws. */
export async function findOwed(client: KubeClient, options: FindOwedOptions): Promise<OwedOnWorkload[]> {
  const { keys, signal } = options;
  const workloads = new Map<string, WorkloadConsumer>();
  for (const key of keys)
    for (const consumer of key.consumers ?? [])
      if (isWorkload(consumer)) workloads.set(consumerKey(consumer), consumer);
  const read: { workload: WorkloadConsumer; object: KubeObject }[] = [];
  await mapWithConcurrency([...workloads.values()], options.parallel, async (workload) => {
    try {
      const object = await client.get(workloadRef(workload.kind, workload.namespace, workload.name), signal);
      if (owedRestarts(object).length > 0) read.push({ workload, object });
    } catch {
      // Unreadable now: the delivery that recorded it alerted; the next run or sweep looks again.
    }
  });
  if (read.length === 0) return [];
  const byId = new Map(keys.map((key) => [key.id, key]));
  const records = new Map<string, Promise<KeyRecord | 'unreadable'>>();
  const recordOf = (key: KeyPolicy): Promise<KeyRecord | 'unreadable'> => {
    let record = records.get(key.id);
    if (record === undefined) {
      record = options.records(key).catch(() => 'unreadable' as const);
      records.set(key.id, record);
    }
    return record;
  };
  const synced = syncedAfterCheck(client, signal);
  const found: OwedOnWorkload[] = [];
  await mapWithConcurrency(read, options.parallel, async ({ workload, object }) => {
    const counting: OwedRestart[] = [];
    const settle: {
      entry: OwedRestart;
      verdict: Exclude<OwedVerdict, { kind: 'owed' | 'rolled' | 'unjudged' }>;
    }[] = [];
    for (const entry of owedRestarts(object)) {
      const key = byId.get(entry.keyId);
      const record = key === undefined ? 'unreadable' : await recordOf(key);
      const verdict = judgeOwed(entry, { workload, object, key, record, nowMs: options.nowMs });
      if (verdict.kind === 'forged' || verdict.kind === 'settle') settle.push({ entry, verdict });
      else if (verdict.kind === 'owed' && options.due(entry)) counting.push(entry);
      else if (verdict.kind === 'rolled' && key !== undefined && options.due(entry)) {
        // Pods rolled after a runner wrote it, before or after its syncs: they hold the value only
        // if every ExternalSecret the restart waits for shows a sync after the store.
        if (await synced(key, Date.parse(entry.storedAt)))
          settle.push({ entry, verdict: { kind: 'settle', why: 'rolled-since' } });
        else counting.push(entry);
      }
    }
    if (settle.length > 0) {
      for (const { entry, verdict } of settle) {
        const fields = {
          consumer: consumerName(workload),
          rotationId: entry.rotationId,
          keyId: entry.keyId,
          storedAt: entry.storedAt,
          why: verdict.why,
        };
        options.audit.emit(
          verdict.kind === 'forged' ? 'consumers.owed-forged' : 'consumers.owed-settled',
          fields,
        );
      }
      try {
        await settleOwed(
          client,
          workloadRef(workload.kind, workload.namespace, workload.name),
          settle.map(({ entry }) => entry),
          signal,
        );
      } catch {
        // Left on the workload: judged the same way (and never acted on) by the next run or sweep.
      }
    }
    if (counting.length > 0) found.push({ workload, owed: counting });
  });
  return found;
}

/**
 * Whether every ExternalSecret `key` lists shows a sync after `storedAtMs` (Ready, and a refresh
 * in a later second than the store: external-secrets' refreshTime is whole seconds). Each object
 * is read once per pick-up; one that cannot be read counts as not synced.
 */
function syncedAfterCheck(
  client: KubeClient,
  signal: AbortSignal | undefined,
): (key: KeyPolicy, storedAtMs: number) => Promise<boolean> {
  const objects = new Map<string, Promise<KubeObject | undefined>>();
  // The version external-secrets.io is served at, discovered once per pick-up (v1 or v1beta1).
  const api = new ExternalSecretApi(client);
  return async (key, storedAtMs) => {
    // A VaultStaticSecret's status holds no time of its last sync: nothing read later proves one
    // after the store, so a roll of the pods is not taken for a delivery (the restart stays owed).
    if ((key.consumers ?? []).some(isVaultStaticSecret)) return false;
    for (const consumer of (key.consumers ?? []).filter(isExternalSecret)) {
      let object = objects.get(consumerKey(consumer));
      if (object === undefined) {
        object = api
          .ref(consumer.namespace, consumer.name, signal)
          .then((ref) => client.get(ref, signal))
          .catch(() => undefined);
        objects.set(consumerKey(consumer), object);
      }
      if (!showsSyncAfter(await object, storedAtMs)) return false;
    }
    return true;
  };
}
