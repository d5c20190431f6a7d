// Writes an object's status the way issue 31 asks: never more often than the state changes, and
// never over a state it did not read. The caller says what the status should be as a function of
// the object as read (its stored conditions and generation); when that equals the stored status
// nothing is sent; else one JSON merge patch of the /status subresource carrying
// metadata.resourceVersion, so the API server applies it only to the version it was computed from
// (409 otherwise: the object is read again, the status computed again, and the patch retried a few
// times). A 404 means the object is gone: nothing to write, no error. Only the Lease leader calls
// this (docs/crds.md, "Watch and status"): pass its term's signal, and a lost term stops the write.
import { CrdError } from '../watch/errors.ts';
import type { ObjectRequests } from '../watch/kube-client.ts';
import type { ObjectRef, WatchedObject } from '../watch/resource.ts';
import { mergePatch, type Json } from './merge-patch.ts';

export type JsonObject = { [key: string]: Json };

export interface StatusWriteOptions {
  requests: ObjectRequests;
  ref: ObjectRef;
  /** The object as the caller last saw it (the reflector's copy); absent: it is read first. */
  current?: WatchedObject;
  /** The whole status the object should carry, computed from the object as read. */
  desired: (object: WatchedObject) => JsonObject;
  signal: AbortSignal;
  /** Patches tried before giving up on a conflict; default 4. */
  maxAttempts?: number;
}

export type StatusWrite =
  | { outcome: 'unchanged' }
  | { outcome: 'written'; attempts: number; object: WatchedObject }
  | { outcome: 'gone' };

const MAX_ATTEMPTS = 4;

/** Throws CrdError: KR_CRD_CONFLICT when every attempt met a newer version, else the request's own. */
export async function writeStatus(options: StatusWriteOptions): Promise<StatusWrite> {
  const { requests, ref, signal } = options;
  const maxAttempts = options.maxAttempts ?? MAX_ATTEMPTS;
  let object = options.current ?? (await readOrGone(requests, ref, signal));
  for (let attempt = 1; object !== 'gone'; attempt++) {
    const stored = storedStatus(object);
    const patch = mergePatch(stored, options.desired(object));
    if (Object.keys(patch).length === 0) return { outcome: 'unchanged' };
    const resourceVersion = object.metadata?.resourceVersion;
    try {
      const written = await requests.patchStatus(
        ref,
        { metadata: resourceVersion === undefined ? {} : { resourceVersion }, status: patch },
        signal,
      );
      return { outcome: 'written', attempts: attempt, object: written };
    } catch (error) {
      if (!(error instanceof CrdError)) throw error;
      if (error.code === 'KR_CRD_NOT_FOUND') return { outcome: 'gone' };
      if (error.code !== 'KR_CRD_CONFLICT') throw error;
      if (attempt >= maxAttempts)
        throw new CrdError(
          'KR_CRD_CONFLICT',
          `${error.where}: the object changed under each of ${String(maxAttempts)} status writes`,
          { where: error.where, status: 409, cause: error },
        );
    }
    // Someone wrote the object since it was read: read it again, compute again.
    object = await readOrGone(requests, ref, signal);
  }
  return { outcome: 'gone' };
}

async function readOrGone(
  requests: ObjectRequests,
  ref: ObjectRef,
  signal: AbortSignal,
): Promise<WatchedObject | 'gone'> {
  try {
    return await requests.get(ref, signal);
  } catch (error) {
    if (error instanceof CrdError && error.code === 'KR_CRD_NOT_FOUND') return 'gone';
    throw error;
  }
}

/** The stored status as JSON; anything but an object counts as none. */
function storedStatus(object: WatchedObject): JsonObject | undefined {
  const status = object.status;
  return typeof status === 'object' && status !== null && !Array.isArray(status)
    ? (status as JsonObject)
    : undefined;
}
