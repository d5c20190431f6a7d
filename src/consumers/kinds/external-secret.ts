// An external-secrets ExternalSecret (external-secrets.io/v1): what `kubectl annotate es NAME
// force-sync=$(date +%s) --overwrite` does (external-secrets' documented way to sync now), then a
// wait until its status shows a sync that read the store after keyroll wrote it.
//
// external-secrets writes `status.refreshTime` (whole seconds, its own clock) after it fetched the
// value and updated the Kubernetes Secret. A refresh time in a later second than the store proves
// the sync came after the store; one in the same second proves nothing, so keyroll asks again a
// second later. (Clocks more than a second apart between keyroll and the controller blur this:
// keep both on NTP.)
import { ConsumerError } from '../errors.ts';
import type { KubeClient, KubeObject, KubeObjectRef } from '../kubernetes/client.ts';
import { pause, waitForObject, type Verdict } from '../wait.ts';

export const EXTERNAL_SECRET_RESOURCE = { group: 'external-secrets.io', version: 'v1', plural: 'externalsecrets' } as const;
export const FORCE_SYNC = 'force-sync';

export function externalSecretRef(namespace: string, name: string): KubeObjectRef {
  return { ...EXTERNAL_SECRET_RESOURCE, namespace, name };
}

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

function readyCondition(object: KubeObject): Condition | undefined {
  const conditions = (object.status as ExternalSecretStatus | undefined)?.conditions;
  if (!Array.isArray(conditions)) return undefined;
  return (conditions as Condition[]).find((condition) => condition.type === 'Ready');
}

function refreshTimeMs(object: KubeObject): number | undefined {
  const time = (object.status as ExternalSecretStatus | undefined)?.refreshTime;
  const ms = typeof time === 'string' ? Date.parse(time) : Number.NaN;
  return Number.isNaN(ms) ? undefined : ms;
}

/**
 * The sync state after a store at `storedAtMs`: done (refresh time), ask again (same second), or
 * waiting. `askedAtMs` is when keyroll asked for the sync, `readyBefore` whether Ready was True then.
 */
export function syncVerdict(object: KubeObject, storedAtMs: number, asked: { atMs: number; readyBefore: boolean }): Verdict<{ refreshedAtMs: number } | 'again'> {
  const ready = readyCondition(object);
  const refreshed = refreshTimeMs(object);
  const storeSecond = Math.floor(storedAtMs / 1000);
  if (ready?.status === 'True' && refreshed !== undefined) {
    const refreshSecond = Math.floor(refreshed / 1000);
    if (refreshSecond > storeSecond) return { done: { refreshedAtMs: refreshed } };
    if (refreshSecond === storeSecond) return { done: 'again' };
  }
  const message = typeof ready?.message === 'string' ? ready.message : '';
  const reason = typeof ready?.reason === 'string' ? ready.reason : 'Ready is False';
  // Ready turned False after keyroll's request (it was True, or it changed since): the sync itself
  // failed (the store refused, a bad remote ref); no point waiting out the timeout.
  const changedMs = typeof ready?.lastTransitionTime === 'string' ? Date.parse(ready.lastTransitionTime) : Number.NaN;
  const turnedFalse = asked.readyBefore || Math.floor(changedMs / 1000) >= Math.floor(asked.atMs / 1000);
  if (ready?.status === 'False' && turnedFalse) return { failed: new ConsumerError('KR_CONSUMER_SYNC_FAILED', `external-secrets reports the sync failed: ${message === '' ? reason : message}`) };
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
  refreshedAtMs: number;
}

/**
 * Asks external-secrets to sync now and waits until it has, after `storedAtMs`. Throws
 * ConsumerError: not found, forbidden, the sync failed, or no sync within `timeoutMs`.
 */
export async function syncExternalSecret(
  client: KubeClient,
  ref: KubeObjectRef,
  storedAtMs: number,
  options: { timeoutMs: number; now: () => number; signal?: AbortSignal; onNotified?: (atMs: number) => void },
): Promise<SyncResult> {
  const deadlineMs = options.now() + options.timeoutMs;
  let notifiedAtMs: number | undefined;
  let previous: KubeObject | undefined;
  for (;;) {
    const annotated = await client.patch(ref, { metadata: { annotations: { [FORCE_SYNC]: forceSyncValue(previous, options.now()) } } }, 'merge', options.signal);
    if (notifiedAtMs === undefined) {
      notifiedAtMs = options.now();
      options.onNotified?.(notifiedAtMs);
    }
    const asked = { atMs: options.now(), readyBefore: readyCondition(annotated)?.status === 'True' };
    const remaining = deadlineMs - options.now();
    if (remaining <= 0) throw new ConsumerError('KR_CONSUMER_TIMEOUT', `no sync of ${ref.namespace}/${ref.name} after the store within the sync timeout`);
    const verdict = syncVerdict(annotated, storedAtMs, asked);
    const { value, object } =
      'done' in verdict
        ? { value: verdict.done, object: annotated }
        : await waitForObject(client, ref, (o) => syncVerdict(o, storedAtMs, asked), {
            timeoutMs: remaining,
            what: `the sync of externalSecret ${ref.namespace}/${ref.name}`,
            ...(options.signal ? { signal: options.signal } : {}),
          }).catch(async (error: unknown) => {
            // Waited out while external-secrets says it cannot sync: that is the news, not the timeout.
            if (!(error instanceof ConsumerError) || error.code !== 'KR_CONSUMER_TIMEOUT') throw error;
            const ready = readyCondition(await client.get(ref, options.signal).catch(() => annotated));
            if (ready?.status !== 'False') throw error;
            throw new ConsumerError('KR_CONSUMER_SYNC_FAILED', `external-secrets reports it cannot sync: ${typeof ready.message === 'string' && ready.message !== '' ? ready.message : 'Ready is False'}`, { cause: error });
          });
    if (value !== 'again') return { notifiedAtMs, refreshedAtMs: value.refreshedAtMs };
    // Synced in the second of the store: maybe before it. Ask once more in the next second.
    previous = object;
    await pause(1_000 - (options.now() % 1_000) + 10, options.signal);
  }
}
