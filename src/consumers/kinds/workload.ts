// The restart of a workload, the same for every kind: the pod template's restartedAt annotation
// as `kubectl rollout restart` writes it (a strategic merge patch; RFC 3339 seconds), and keyroll's
// markers (markers.ts) in the same patch, under the resourceVersion keyroll read: a runner that
// lost the race reads the workload again and finds the rotations already restarted for.
import { ConsumerError } from '../errors.ts';
import type { KubeClient, KubeObject, KubeObjectRef } from '../kubernetes/client.ts';
import {
  owedAnnotation,
  owedRestarts,
  RESTART_OWED,
  RESTARTED_AT,
  restartedFor,
  restartedForAnnotation,
  RESTARTED_FOR,
  rolloutOf,
  type OwedRestart,
} from '../markers.ts';

/** Read-modify-write attempts before a workload that keeps changing is given up on (409 each time). */
const ATTEMPTS = 5;

async function readModifyWrite<T>(
  client: KubeClient,
  ref: KubeObjectRef,
  signal: AbortSignal | undefined,
  change: (object: KubeObject) => Promise<T | undefined> | T | undefined,
  done: (object: KubeObject) => T,
): Promise<T> {
  let lastConflict: unknown;
  for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
    const object = await client.get(ref, signal);
    try {
      const result = await change(object);
      return result ?? done(object);
    } catch (error) {
      if (!(error instanceof ConsumerError) || error.code !== 'KR_CONSUMER_CONFLICT') throw error;
      lastConflict = error;
    }
  }
  throw new ConsumerError(
    'KR_CONSUMER_CONFLICT',
    `${ref.plural} ${ref.namespace}/${ref.name} changed under every one of ${String(ATTEMPTS)} attempts`,
    { cause: lastConflict },
  );
}

function versionOf(object: KubeObject, ref: KubeObjectRef): string {
  const version = object.metadata?.resourceVersion;
  if (version === undefined)
    throw new ConsumerError(
      'KR_CONSUMER_REFUSED',
      `${ref.plural} ${ref.namespace}/${ref.name} came back without a resourceVersion`,
    );
  return version;
}

/**
 * Records on the workload that it is owed a restart for `owed` (before the syncs it waits for):
 * a runner that dies before the restart leaves it for the next run. Rotations it was already
 * restarted for are not recorded again. Each entry carries the workload's rollout count
 * (markers.ts rolloutOf; owed.ts: a later one means the pods rolled since).
 */
export async function recordOwed(
  client: KubeClient,
  ref: KubeObjectRef,
  owed: readonly OwedRestart[],
  signal?: AbortSignal,
): Promise<void> {
  await readModifyWrite(
    client,
    ref,
    signal,
    async (object) => {
      const done = new Set(restartedFor(object));
      const current = owedRestarts(object);
      const rollout = rolloutOf(ref.plural, object);
      const added = owed
        .filter(
          (entry) => !done.has(entry.rotationId) && !current.some((c) => c.rotationId === entry.rotationId),
        )
        .map((entry) => ({ ...entry, ...(rollout === undefined ? {} : { rollout }) }));
      if (added.length === 0) return true;
      await client.patch(
        ref,
        {
          metadata: {
            resourceVersion: versionOf(object, ref),
            annotations: { [RESTART_OWED]: owedAnnotation([...current, ...added]) },
          },
        },
        'merge',
        signal,
      );
      return true;
    },
    () => true,
  );
}

/**
 * Marks `rotationIds` owed on the workload as left for the restart window (the next run in it
 * restarts them), at the rollout count of now: their syncs are done, so any rollout from here on
 * starts the pods on their values (owed.ts).
 */
export async function markDeferred(
  client: KubeClient,
  ref: KubeObjectRef,
  rotationIds: readonly string[],
  signal?: AbortSignal,
): Promise<void> {
  await readModifyWrite(
    client,
    ref,
    signal,
    async (object) => {
      const current = owedRestarts(object);
      if (!current.some((entry) => rotationIds.includes(entry.rotationId) && entry.deferred !== true))
        return true;
      const rollout = rolloutOf(ref.plural, object);
      const next = current.map((entry) =>
        rotationIds.includes(entry.rotationId)
          ? { ...entry, deferred: true, ...(rollout === undefined ? {} : { rollout }) }
          : entry,
      );
      await client.patch(
        ref,
        {
          metadata: {
            resourceVersion: versionOf(object, ref),
            annotations: { [RESTART_OWED]: owedAnnotation(next) },
          },
        },
        'merge',
        signal,
      );
      return true;
    },
    () => true,
  );
}

export type RestartAnswer =
  /** Patched: the pods roll. `generation` is the workload's after the patch. */
  | { restarted: true; object: KubeObject; restartedAt: string; rotationIds: string[] }
  /** Another runner restarted it for every one of these rotations already. */
  | { restarted: false };

/** `kubectl rollout restart`'s value: RFC 3339 in whole seconds, moved on a second when it would not change. */
export function restartedAtValue(object: KubeObject, nowMs: number): string {
  const current = (
    object.spec as { template?: { metadata?: { annotations?: Record<string, string> } } } | undefined
  )?.template?.metadata?.annotations?.[RESTARTED_AT];
  let at = Math.floor(nowMs / 1000) * 1000;
  const currentMs = current === undefined ? Number.NaN : Date.parse(current);
  if (!Number.isNaN(currentMs) && currentMs >= at) at = currentMs + 1000;
  return `${new Date(at).toISOString().slice(0, 19)}Z`;
}

/**
 * Restarts the workload for `rotationIds` unless it was already restarted for all of them: the
 * restart, restarted-for and the owed entries it settles (its own, and those left for the window)
 * in one patch under the version read.
 */
export async function restartWorkload(
  client: KubeClient,
  ref: KubeObjectRef,
  rotationIds: readonly string[],
  options: { now: () => number; signal?: AbortSignal },
): Promise<RestartAnswer> {
  return readModifyWrite<RestartAnswer>(
    client,
    ref,
    options.signal,
    async (object) => {
      const before = restartedFor(object);
      const due = rotationIds.filter((id) => !before.includes(id));
      if (due.length === 0) return { restarted: false };
      const restartedAt = restartedAtValue(object, options.now());
      // A restart also delivers the values left for the restart window: they were synced before
      // they were left (their runner waited for the syncs), so these pods start on them too.
      const owed = owedRestarts(object);
      const settled = [
        ...due,
        ...owed
          .filter(
            (entry) =>
              entry.deferred === true &&
              !due.includes(entry.rotationId) &&
              !before.includes(entry.rotationId),
          )
          .map((entry) => entry.rotationId),
      ];
      // Entries of other runners still on their way (their syncs may not be done: this restart may
      // start the pods before them) are carried to the rollout this patch makes, one more than the
      // one read (the next revision, the next generation), so the roll this restart makes does not
      // count as having delivered them (owed.ts).
      const current = rolloutOf(ref.plural, object);
      const stillOwed = owed
        .filter((entry) => !rotationIds.includes(entry.rotationId) && !settled.includes(entry.rotationId))
        .map((entry) =>
          entry.rollout === undefined || current === undefined ? entry : { ...entry, rollout: current + 1 },
        );
      const patch = {
        metadata: {
          resourceVersion: versionOf(object, ref),
          annotations: {
            [RESTARTED_FOR]: restartedForAnnotation(before, settled),
            [RESTART_OWED]: owedAnnotation(stillOwed),
          },
        },
        spec: { template: { metadata: { annotations: { [RESTARTED_AT]: restartedAt } } } },
      };
      const patched = await client.patch(ref, patch, 'strategic', options.signal);
      return { restarted: true, object: patched, restartedAt, rotationIds: settled };
    },
    () => ({ restarted: false }),
  );
}

/**
 * Removes `entries` from the workload's owed restarts (owed.ts judged they no longer count); an
 * entry that changed since it was judged (rewritten by a runner) is left for the next judgment.
 */
export async function settleOwed(
  client: KubeClient,
  ref: KubeObjectRef,
  entries: readonly OwedRestart[],
  signal?: AbortSignal,
): Promise<void> {
  const judged = new Set(entries.map((entry) => JSON.stringify(entry)));
  await readModifyWrite(
    client,
    ref,
    signal,
    async (object) => {
      const current = owedRestarts(object);
      const kept = current.filter((entry) => !judged.has(JSON.stringify(entry)));
      if (kept.length === current.length) return true;
      await client.patch(
        ref,
        {
          metadata: {
            resourceVersion: versionOf(object, ref),
            annotations: { [RESTART_OWED]: owedAnnotation(kept) },
          },
        },
        'merge',
        signal,
      );
      return true;
    },
    () => true,
  );
}

/**
 * Records that the workload was restarted for `rotationIds` by someone else (Reloader, reloader.ts)
 * once its rollout was proved: restarted-for names them and their owed entries (and those left for
 * the window: that rollout started the pods after their syncs too) are settled, as keyroll's own
 * restart does, but the pod template is left alone. False when another runner recorded them all.
 */
export async function recordRestarted(
  client: KubeClient,
  ref: KubeObjectRef,
  rotationIds: readonly string[],
  signal?: AbortSignal,
): Promise<boolean> {
  return readModifyWrite(
    client,
    ref,
    signal,
    async (object) => {
      const before = restartedFor(object);
      const due = rotationIds.filter((id) => !before.includes(id));
      if (due.length === 0) return false;
      const owed = owedRestarts(object);
      const settled = [
        ...due,
        ...owed
          .filter(
            (entry) =>
              entry.deferred === true &&
              !due.includes(entry.rotationId) &&
              !before.includes(entry.rotationId),
          )
          .map((entry) => entry.rotationId),
      ];
      const stillOwed = owed.filter(
        (entry) => !rotationIds.includes(entry.rotationId) && !settled.includes(entry.rotationId),
      );
      await client.patch(
        ref,
        {
          metadata: {
            resourceVersion: versionOf(object, ref),
            annotations: {
              [RESTARTED_FOR]: restartedForAnnotation(before, settled),
              [RESTART_OWED]: owedAnnotation(stillOwed),
            },
          },
        },
        'merge',
        signal,
      );
      return true;
    },
    () => false,
  );
}
