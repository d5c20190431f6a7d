// Keeping the AWS key lock alive (invariant 9): the rotation refreshes its lock in the background
// for the whole roll → store → verify. A refresh is the lock's compare-and-swap (lock/target.ts or
// lock/companion.ts, wherever the lock was taken) from the version this process holds
// (HeldLock.token) to a new `held` value with a later expiry. It never creates a lock: a refused
// move means the lock is released or held by another runner, and the caller learns it is lost
// (undefined) instead of taking a fresh one.
// One exception to "exactly the version held": when the lock carries this same owner and rotation
// under another version, a refresh of ours landed earlier without its answer reaching us (the
// caller then saw an error and kept its older HeldLock). No other runner writes our owner and
// rotation, so that version is still our lock: the CAS is retried from it.
import { BackendError } from '../../errors.ts';
import type { HeldLock } from '../../types.ts';
import { placeOfLock } from './lock.ts';
import {
  MAX_ROUNDS,
  holderOf,
  isOurs,
  landedLock,
  lockToken,
  releaseDigestOf,
  type HeldValue,
  type LockContext,
  type LockPlace,
  type SwapOutcome,
} from './value.ts';

/** Extends `lock` to `ttlMs` from now while it is still ours; undefined when it is lost. */
export async function refreshLock(
  context: LockContext,
  path: string,
  lock: HeldLock,
  ttlMs: number,
): Promise<HeldLock | undefined> {
  const { place, versionId, releaseKey } = placeOfLock(context, path, lock);
  try {
    return await extend(context, place, versionId, releaseKey, lock, ttlMs);
  } catch (error) {
    throw place.errorOf(error, 'lock');
  }
}

async function extend(
  context: LockContext,
  place: LockPlace,
  heldVersion: string,
  releaseKey: string | undefined,
  lock: HeldLock,
  ttlMs: number,
): Promise<HeldLock | undefined> {
  let from = heldVersion;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const held: HeldValue = {
      state: 'held',
      owner: lock.owner,
      rotationId: lock.rotationId,
      expiresAt: new Date(context.now().getTime() + ttlMs).toISOString(),
      // The same release key as when taken: the finish record still gives the lock back.
      ...(releaseKey === undefined ? {} : { releaseDigest: releaseDigestOf(releaseKey) }),
    };
    let swap: SwapOutcome;
    try {
      swap = await place.swap(from, held, 'lock');
    } catch (error) {
      // No lock secret any more (deleted by hand): nothing of ours to extend, and never create one.
      if (error instanceof BackendError && error.code === 'KR_BACKEND_NOT_FOUND') return undefined;
      // An answer lost on the way: the extension may have landed; read back, as acquiring does.
      const landed = await landedLock(place, held, releaseKey, error, lock.tookOver);
      if (landed?.acquired) return landed.lock;
      throw error;
    }
    if (swap.won)
      return {
        ...holderOf(held),
        token: lockToken(place.kind, swap.versionId, releaseKey),
        tookOver: lock.tookOver,
      };
    const now = swap.now;
    if (now?.value.state !== 'held' || !isOurs(now.value, lock)) return undefined;
    from = now.versionId;
  }
  throw new BackendError(
    'KR_BACKEND_CONFLICT',
    `aws key lock at ${place.secretId} kept changing while keyroll refreshed it`,
    {
      backend: context.backendName,
      kind: 'aws',
      operation: 'lock',
      path: place.secretId,
    },
  );
}
