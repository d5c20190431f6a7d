// Each consumer's last refresh, for `keyroll status`. It is read from the consumer itself, not
// from a record keyroll keeps: an ExternalSecret's own status (refreshTime, Ready), a workload's
// pod template (restartedAt, which `kubectl rollout restart` writes too) and the annotations
// keyroll writes with each restart (restarted-for, restart-owed). So status shows what the cluster
// holds: a refresh done by hand counts, a consumer deleted since shows as missing, and nothing is
// written to the secret backends after a rotation (no write of the backends' quotas spent on it:
// invariant 11). What the objects cannot hold — a webhook notice, a failure's reason — is in the
// audit trail (consumer.* events) and the metrics.
import { errorCode, errorMessage } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { ConsumerError } from './errors.ts';
import { ExternalSecretApi } from './kinds/external-secret-api.ts';
import { showsSyncAfter } from './kinds/external-secret.ts';
import { SYNC_REQUESTED, vaultStaticSecretRef } from './kinds/vault-static-secret.ts';
import { WORKLOAD_KINDS, workloadRef } from './kinds/workloads.ts';
import type { KubeClient, KubeObject } from './kubernetes/client.ts';
import { owedRestarts, RESTARTED_AT, restartedFor, type OwedRestart } from './markers.ts';
import { judgeOwed } from './owed.ts';
import {
  consumerName,
  isExternalSecret,
  isVaultStaticSecret,
  isWorkload,
  type ConsumerRef,
  type ExternalSecretConsumer,
  type WorkloadConsumer,
} from './refs.ts';

/**
 * current: holds the value of the last rotation (synced, or restarted and rolled out after it).
 * rolling-out: restarted after it, rollout not complete. owed / deferred: a restart for it is
 * recorded and not done yet (deferred: waiting for the restart window). stale: not refreshed since
 * the last rotation (a slot entry's consumers pick a new value up within consumerRefresh).
 * notice: a webhook (told by notice; the audit trail says how it went). unreadable: see errorCode.
 */
export type ConsumerState =
  'current' | 'rolling-out' | 'owed' | 'deferred' | 'stale' | 'notice' | 'unreadable';

export interface ConsumerStatus {
  consumer: string;
  state: ConsumerState;
  /** ISO-8601: an ExternalSecret's last sync, a workload's last restart (null: never, or a webhook). */
  lastRefreshAt: string | null;
  /** Workloads: the rotations its latest restarts were for (keyroll.io/restarted-for), newest last. */
  restartedFor?: string[];
  detail: string;
  errorCode?: string;
}

export interface LastRotation {
  lastRotatedAt?: string | undefined;
  lastRotationId?: string | undefined;
}

/** One discovery of external-secrets.io per client (a status command makes one client). */
const externalSecretApis = new WeakMap<KubeClient, ExternalSecretApi>();

function externalSecretApi(client: KubeClient): ExternalSecretApi {
  let api = externalSecretApis.get(client);
  if (api === undefined) {
    api = new ExternalSecretApi(client);
    externalSecretApis.set(client, api);
  }
  return api;
}

/**
 * The state of every consumer `key` lists; `client` undefined when no Kubernetes client could be
 * made (`clientError` says why). A workload reads as current only when it runs on the value its
 * ExternalSecrets hold after the last rotation (workloadStatus).
 */
export async function consumerStatuses(
  key: KeyPolicy,
  last: LastRotation,
  client: KubeClient | undefined,
  clientError?: unknown,
): Promise<ConsumerStatus[]> {
  const consumers = key.consumers ?? [];
  const read = async (
    consumer: ExternalSecretConsumer,
  ): Promise<{ status: ConsumerStatus; syncedAt?: string }> => {
    if (client === undefined) return { status: unreadable(consumer, clientError) };
    try {
      const object = await client.get(await externalSecretApi(client).ref(consumer.namespace, consumer.name));
      return externalSecretStatus(consumer, object, last);
    } catch (error) {
      return { status: unreadable(consumer, error) };
    }
  };
  const externalSecrets = new Map(
    consumers.filter(isExternalSecret).map((consumer) => [consumer, read(consumer)] as const),
  );
  const synced = Promise.all(externalSecrets.values());
  return Promise.all(
    consumers.map(async (consumer): Promise<ConsumerStatus> => {
      if (consumer.kind === 'webhook')
        return {
          consumer: consumerName(consumer),
          state: 'notice',
          lastRefreshAt: null,
          detail:
            'told by a notice as each rotation ends: see consumer.refreshed and notify.* in the audit trail',
        };
      const externalSecret = isExternalSecret(consumer) ? externalSecrets.get(consumer) : undefined;
      if (externalSecret !== undefined) return (await externalSecret).status;
      if (client === undefined) return unreadable(consumer, clientError);
      try {
        if (isVaultStaticSecret(consumer))
          return vaultStaticSecretStatus(
            consumer,
            await client.get(vaultStaticSecretRef(consumer.namespace, consumer.name)),
            last,
          );
        if (isWorkload(consumer))
          return workloadStatus(
            key,
            consumer,
            await client.get(workloadRef(consumer.kind, consumer.namespace, consumer.name)),
            last,
            await synced,
          );
        return unreadable(
          consumer,
          new ConsumerError('KR_CONSUMER_REFUSED', `unknown consumer kind ${consumer.kind}`),
        );
      } catch (error) {
        return unreadable(consumer, error);
      }
    }),
  );
}

/**
 * A VaultStaticSecret: its status holds no time of its last sync, so `current` rests on keyroll's
 * own ask (keyroll.io/sync-requested no earlier than the last rotation) and the operator's
 * SecretSynced condition not False; the proof itself is the delivery's (consumer.refreshed).
 */
function vaultStaticSecretStatus(
  consumer: ConsumerRef,
  object: KubeObject,
  last: LastRotation,
): ConsumerStatus {
  const asked = object.metadata?.annotations?.[SYNC_REQUESTED];
  const conditions = (object.status as { conditions?: unknown } | undefined)?.conditions;
  const synced = Array.isArray(conditions)
    ? (conditions as { type?: unknown; status?: unknown }[]).find(
        (condition) => condition.type === 'SecretSynced',
      )
    : undefined;
  const lastMs = last.lastRotatedAt === undefined ? Number.NaN : Date.parse(last.lastRotatedAt);
  const askedMs = asked === undefined ? Number.NaN : Date.parse(asked);
  const current =
    !Number.isNaN(askedMs) && (Number.isNaN(lastMs) || askedMs >= lastMs) && synced?.status !== 'False';
  const detail = `${asked === undefined ? 'never asked to sync by keyroll' : `asked to sync ${asked}`}; SecretSynced ${typeof synced?.status === 'string' ? synced.status : 'unknown'}`;
  return {
    consumer: consumerName(consumer),
    state: current ? 'current' : 'stale',
    lastRefreshAt: asked ?? null,
    detail,
  };
}

function unreadable(consumer: ConsumerRef, error: unknown): ConsumerStatus {
  const code = error instanceof ConsumerError ? error.code : errorCode(error);
  return {
    consumer: consumerName(consumer),
    state: 'unreadable',
    lastRefreshAt: null,
    detail: errorMessage(error),
    errorCode: code,
  };
}

function secondOf(iso: string | undefined): number {
  const ms = iso === undefined ? Number.NaN : Date.parse(iso);
  return Number.isNaN(ms) ? Number.NaN : Math.floor(ms / 1000);
}

function externalSecretStatus(
  consumer: ExternalSecretConsumer,
  object: KubeObject,
  last: LastRotation,
): { status: ConsumerStatus; syncedAt?: string } {
  const status = (object.status ?? {}) as {
    refreshTime?: unknown;
    conditions?: { type?: unknown; status?: unknown; message?: unknown }[];
  };
  const refreshTime = typeof status.refreshTime === 'string' ? status.refreshTime : undefined;
  const ready = Array.isArray(status.conditions)
    ? status.conditions.find((condition) => condition.type === 'Ready')
    : undefined;
  const readyText =
    ready === undefined
      ? 'no Ready condition'
      : `Ready ${String(ready.status)}${typeof ready.message === 'string' && ready.message !== '' ? `: ${ready.message}` : ''}`;
  // The same proof as a pick-up's (showsSyncAfter): a sync keyroll asked for in the store's own
  // second reads current, not stale, once external-secrets' status proves it.
  const current =
    ready?.status === 'True' &&
    refreshTime !== undefined &&
    (last.lastRotatedAt === undefined || showsSyncAfter(object, Date.parse(last.lastRotatedAt)));
  const result: ConsumerStatus = {
    consumer: consumerName(consumer),
    state: current ? 'current' : 'stale',
    lastRefreshAt: refreshTime ?? null,
    detail: `${refreshTime === undefined ? 'never synced' : `synced ${refreshTime}`}; ${readyText}`,
  };
  return { status: result, ...(current ? { syncedAt: refreshTime } : {}) };
}

/**
 * Only this key's entries that count (owed.ts, judged against the record status read): a forged
 * entry, one restarted for already, superseded, or one a rollout came after (an undo that brought
 * an old entry back included) is not shown as owed. Other keys' entries show on their own rows.
 */
function countingOwed(
  key: KeyPolicy,
  consumer: WorkloadConsumer,
  object: KubeObject,
  last: LastRotation,
): OwedRestart[] {
  const record = { lastRotationId: last.lastRotationId, lastRotatedAt: last.lastRotatedAt };
  return owedRestarts(object).filter(
    (entry) =>
      judgeOwed(entry, {
        workload: consumer,
        object,
        key: entry.keyId === key.id ? key : undefined,
        record,
        nowMs: Date.now(),
      }).kind === 'owed',
  );
}

/**
 * A workload's state. Its pods run on the stored value when keyroll restarted it for the last
 * rotation (restarted-for: keyroll restarts for a rotation only after proving every sync that
 * rotation's ExternalSecrets needed), or when it was restarted some other way (kubectl rollout
 * restart) in a later second than every ExternalSecret of the key synced after that rotation.
 */
function workloadStatus(
  key: KeyPolicy,
  consumer: WorkloadConsumer,
  object: KubeObject,
  last: LastRotation,
  externalSecrets: readonly { status: ConsumerStatus; syncedAt?: string }[],
): ConsumerStatus {
  const template = (
    object.spec as { template?: { metadata?: { annotations?: Record<string, string> } } } | undefined
  )?.template;
  const restartedAt = template?.metadata?.annotations?.[RESTARTED_AT];
  const ids = restartedFor(object);
  const owed = countingOwed(key, consumer, object, last);
  const base = {
    consumer: consumerName(consumer),
    lastRefreshAt: restartedAt ?? null,
    ...(ids.length === 0 ? {} : { restartedFor: ids }),
  };
  if (owed.length > 0) {
    const deferred = owed.every((entry) => entry.deferred === true);
    return {
      ...base,
      state: deferred ? 'deferred' : 'owed',
      detail: `a restart is ${deferred ? 'waiting for the restart window' : 'owed'} for ${owed.map((entry) => `${entry.keyId} (${entry.rotationId})`).join(', ')}`,
    };
  }
  const byKeyroll = last.lastRotationId !== undefined && ids.includes(last.lastRotationId);
  const forLast =
    byKeyroll || last.lastRotatedAt === undefined || secondOf(restartedAt) >= secondOf(last.lastRotatedAt);
  if (!forLast)
    return {
      ...base,
      state: 'stale',
      detail:
        restartedAt === undefined
          ? 'never restarted since keyroll knows it'
          : `last restarted ${restartedAt}, before the last rotation`,
    };
  if (!byKeyroll && last.lastRotatedAt !== undefined) {
    // Restarted, but not by keyroll for this rotation: on the new value only if its Secrets had it.
    const unsynced = externalSecrets.filter(
      (entry) => entry.syncedAt === undefined || !(secondOf(restartedAt) > secondOf(entry.syncedAt)),
    );
    if (unsynced.length > 0)
      return {
        ...base,
        state: 'stale',
        detail: `restarted ${restartedAt ?? '(not by kubectl or keyroll)'}, not after ${unsynced.map((entry) => entry.status.consumer).join(', ')} synced the new value`,
      };
  }
  const rollout = WORKLOAD_KINDS[consumer.kind].rollout(object);
  if ('waiting' in rollout) return { ...base, state: 'rolling-out', detail: rollout.waiting };
  if ('failed' in rollout) return { ...base, state: 'rolling-out', detail: rollout.failed.message };
  return {
    ...base,
    state: 'current',
    detail: `restarted ${restartedAt ?? '(not by kubectl or keyroll)'}, rollout complete`,
  };
}
