// An external-secrets ExternalSecret (external-secrets.io v1 or v1beta1: external-secret-api.ts):
// what `kubectl annotate es NAME force-sync=$(date +%s) --overwrite` does (external-secrets'
// documented way to sync now), then a wait until its status proves a sync that read the store
// after keyroll wrote it.
//
// The proof is read from the controller's status as the API server holds it (a read, then a
// watch), never from the answer to keyroll's own patch (which shows the status from before it).
// Two proofs, the first that holds:
// - the status's syncedResourceVersion is external-secrets' value for the object's metadata as it
//   is now, and that metadata still carries keyroll's force-sync value (external-secret-synced.ts):
//   the sync read the object after keyroll's patch, itself after the store. No clock involved;
// - status.refreshTime (whole seconds, the controller's clock, the start of its reconcile) in a
//   later second than the store. One in the store's own second proves nothing, so keyroll asks
//   once more in the next second, once: after that it only waits. (Clocks more than a second
//   apart between keyroll and the controller blur this one: keep both on NTP.)
import { ConsumerError } from '../errors.ts';
import type { KubeClient, KubeObject, KubeObjectRef } from '../kubernetes/client.ts';
import { waitForObject, type Verdict } from '../wait.ts';
import { forceSyncOff } from './external-secret-refresh.ts';
import { syncedThisState } from './external-secret-synced.ts';

export const FORCE_SYNC = 'force-sync';

interface ExternalSecretStatus {
  refreshTime?: unknown;
  conditions?: unknown;
}

interface Condition {
  type?: unknown;
  status?: unknown;
  reason?: unknown;
  message?: unknown;
  lastTransitionTime?: unknown;
}

export function readyCondition(object: KubeObject): Condition | undefined {
  const conditions = (object.status as ExternalSecretStatus | undefined)?.conditions;
  if (!Array.isArray(conditions)) return undefined;
  return (conditions as Condition[]).find((condition) => condition.type === 'Ready');
}

function refreshTimeMs(object: KubeObject): number | undefined {
  const time = (object.status as ExternalSecretStatus | undefined)?.refreshTime;
  const ms = typeof time === 'string' ? Date.parse(time) : Number.NaN;
  return Number.isNaN(ms) ? undefined : ms;
}

/** What keyroll asked: the force-sync value it wrote, when, and whether Ready was True before. */
export interface SyncAsk {
  value: string;
  atMs: number;
  readyBefore: boolean;
  /** The object's resourceVersion in the answer to keyroll's patch: any later write differs. */
  resourceVersion?: string | undefined;
}

/** How a sync was proved (sync.proof in the audit trail's consumer.refreshed has no field for it: the docs say both). */
export type SyncProof = 'synced-resource-version' | 'refresh-time';

/**
 * The sync state after a store at `storedAtMs`: done (and how it was proved), `same-second` (a
 * sync in the store's own second: it may have read the store before the write), or waiting.
 */
export function syncVerdict(
  object: KubeObject,
  storedAtMs: number,
  ask: SyncAsk,
): Verdict<{ proof: SyncProof } | 'same-second'> {
  const ready = readyCondition(object);
  const refreshed = refreshTimeMs(object);
  if (ready?.status === 'True') {
    if (object.metadata?.annotations?.[FORCE_SYNC] === ask.value && syncedThisState(object))
      return { done: { proof: 'synced-resource-version' } };
    if (refreshed !== undefined) {
      const refreshSecond = Math.floor(refreshed / 1000);
      const storeSecond = Math.floor(storedAtMs / 1000);
      if (refreshSecond > storeSecond) return { done: { proof: 'refresh-time' } };
      if (refreshSecond === storeSecond) return { done: 'same-second' };
    }
  }
  const message = typeof ready?.message === 'string' ? ready.message : '';
  const reason = typeof ready?.reason === 'string' ? ready.reason : 'Ready is False';
  // Ready turned False after keyroll's request (it was True, or it changed since): the sync itself
  // failed (the store refused, a bad remote ref); no point waiting out the timeout.
  const changedMs =
    typeof ready?.lastTransitionTime === 'string' ? Date.parse(ready.lastTransitionTime) : Number.NaN;
  // A status written after keyroll's patch answers it: external-secrets writes its status under the
  // resourceVersion it read (a conflict makes it read again), so that write's reconcile saw the ask.
  // A False from before the patch (an object made just before, still failing), even in the ask's
  // own second, proves nothing: the sync keyroll asked for may be about to succeed.
  const writtenSince =
    ask.resourceVersion !== undefined &&
    object.metadata?.resourceVersion !== undefined &&
    object.metadata.resourceVersion !== ask.resourceVersion;
  const turnedFalse =
    ask.readyBefore || writtenSince || Math.floor(changedMs / 1000) > Math.floor(ask.atMs / 1000);
  if (ready?.status === 'False' && turnedFalse)
    return {
      failed: new ConsumerError(
        'KR_CONSUMER_SYNC_FAILED',
        `external-secrets reports the sync failed: ${message === '' ? reason : message}`,
      ),
    };
  const last = refreshed === undefined ? 'never synced' : `last sync ${new Date(refreshed).toISOString()}`;
  return { waiting: ready?.status === 'False' ? `${last}; Ready is False: ${message}` : last };
}

/** The force-sync annotation's next value: the unix second, changed even when asked twice in one second. */
export function forceSyncValue(object: KubeObject | undefined, nowMs: number): string {
  const second = Math.floor(nowMs / 1000);
  const current = Number(object?.metadata?.annotations?.[FORCE_SYNC]);
  return String(Number.isFinite(current) && current >= second ? current + 1 : second);
}

export interface SyncResult {
  notifiedAtMs: number;
  /** How many times keyroll asked (1, or 2 after a sync in the store's own second). */
  asks: number;
  proof: SyncProof;
}

interface SyncOptions {
  timeoutMs: number;
  now: () => number;
  signal?: AbortSignal;
  onNotified?: (atMs: number) => void;
}

/**
 * Asks external-secrets to sync now and waits until it has, after `storedAtMs`. Throws
 * ConsumerError: not found, forbidden, force-sync switched off by the refresh settings, the sync
 * failed, or no sync within `timeoutMs`.
 */
export async function syncExternalSecret(
  client: KubeClient,
  ref: KubeObjectRef,
  storedAtMs: number,
  options: SyncOptions,
): Promise<SyncResult> {
  const deadlineMs = options.now() + options.timeoutMs;
  const current = await client.get(ref, options.signal);
  const off = forceSyncOff(current);
  if (off !== undefined) throw off;
  let ask = await askToSync(client, ref, current, options);
  const notifiedAtMs = ask.atMs;
  options.onNotified?.(notifiedAtMs);
  for (let asks = 1; ; asks++) {
    // The re-ask waits for the next second; until then a proof may still come.
    const reAsk = new AbortController();
    let scheduled = false;
    const remaining = deadlineMs - options.now();
    if (remaining <= 0)
      throw new ConsumerError(
        'KR_CONSUMER_TIMEOUT',
        `no sync of ${ref.namespace}/${ref.name} after the store within the sync timeout`,
      );
    const thisAsk = ask;
    const judge = (object: KubeObject): Verdict<{ proof: SyncProof } | 'same-second'> => {
      const verdict = syncVerdict(object, storedAtMs, thisAsk);
      if (!('done' in verdict) || verdict.done !== 'same-second') return verdict;
      // Asked once more already: a sync in the store's second proves nothing; wait for another.
      if (asks > 1)
        return {
          waiting: `last sync in the second of the store (${new Date(storedAtMs).toISOString()}); asked again`,
        };
      if (!scheduled) {
        scheduled = true;
        setTimeout(
          () => {
            reAsk.abort();
          },
          1_000 - (options.now() % 1_000) + 10,
        ).unref();
      }
      return { waiting: 'last sync in the second of the store; asking again in the next second' };
    };
    const stop =
      options.signal === undefined ? reAsk.signal : AbortSignal.any([reAsk.signal, options.signal]);
    try {
      const { value } = await waitForObject(client, ref, judge, {
        timeoutMs: remaining,
        what: `the sync of externalSecret ${ref.namespace}/${ref.name}`,
        signal: stop,
      });
      if (value !== 'same-second') return { notifiedAtMs, asks, proof: value.proof };
    } catch (error) {
      if (reAsk.signal.aborted && options.signal?.aborted !== true) {
        ask = await askToSync(client, ref, await client.get(ref, options.signal), options);
        continue;
      }
      throw await failureOrTimeout(client, ref, error, options.signal);
    }
  }
}

/** The force-sync patch, with a value the object does not hold yet (so the patch changes its metadata). */
async function askToSync(
  client: KubeClient,
  ref: KubeObjectRef,
  current: KubeObject,
  options: SyncOptions,
): Promise<SyncAsk> {
  const value = forceSyncValue(current, options.now());
  // The answer's status is not judged (it is from before this request); its resourceVersion tells
  // a later status write from it.
  const patched = await client.patch(
    ref,
    { metadata: { annotations: { [FORCE_SYNC]: value } } },
    'merge',
    options.signal,
  );
  return {
    value,
    atMs: options.now(),
    readyBefore: readyCondition(current)?.status === 'True',
    resourceVersion: patched.metadata?.resourceVersion,
  };
}

/** Waited out while external-secrets says it cannot sync: that is the news, not the timeout. */
async function failureOrTimeout(
  client: KubeClient,
  ref: KubeObjectRef,
  error: unknown,
  signal: AbortSignal | undefined,
): Promise<unknown> {
  if (!(error instanceof ConsumerError) || error.code !== 'KR_CONSUMER_TIMEOUT') return error;
  const ready = readyCondition(await client.get(ref, signal).catch(() => ({})));
  if (ready?.status !== 'False') return error;
  return new ConsumerError(
    'KR_CONSUMER_SYNC_FAILED',
    `external-secrets reports it cannot sync: ${typeof ready.message === 'string' && ready.message !== '' ? ready.message : 'Ready is False'}`,
    { cause: error },
  );
}

/**
 * Whether an ExternalSecret shows a sync after a store at `storedAtMs`, read from its status alone
 * (a pick-up of owed restarts, `keyroll status`): Ready, and a refresh in a later second than the
 * store (refreshTime is whole seconds), or in the store's own second with the proof below.
 */
export function showsSyncAfter(object: KubeObject | undefined, storedAtMs: number): boolean {
  const status = (object?.status ?? {}) as {
    refreshTime?: unknown;
    conditions?: { type?: unknown; status?: unknown }[];
  };
  const ready =
    Array.isArray(status.conditions) &&
    status.conditions.some((condition) => condition.type === 'Ready' && condition.status === 'True');
  if (!ready || object === undefined) return false;
  const storeSecond = Math.floor(storedAtMs / 1000);
  const refreshMs = typeof status.refreshTime === 'string' ? Date.parse(status.refreshTime) : Number.NaN;
  if (Math.floor(refreshMs / 1000) > storeSecond) return true;
  // A sync in the store's own second: proved when external-secrets synced the object's current
  // metadata (syncedResourceVersion) and that metadata holds a force-sync keyroll asked for no
  // earlier than the store's second (keyroll asks only after a store). The real controller syncs
  // keyroll's ask within ~0.2 s, so this is the usual case, not the exception.
  const asked = Number(object.metadata?.annotations?.[FORCE_SYNC]);
  return (
    Math.floor(refreshMs / 1000) === storeSecond &&
    Number.isFinite(asked) &&
    asked >= storeSecond &&
    syncedThisState(object)
  );
}
