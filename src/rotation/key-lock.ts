// The key lock, taken the one way every caller takes it: the rotation (step-decide.ts, released in
// rotate-key.ts), a drift probe confirming a dead secret (drift.ts), a quarantine reminder that is
// due and `keyroll resume` (quarantine.ts). Take the key's locks, do the work under them, give them
// back. Nothing takes it on a schedule for nothing: on AWS each take writes a version of the secret.
//
// Invariant 5, one roll at a time per key across every runner (a scheduled run, a manual Job and a
// daemon at once): a key holds one lock per destination, each in its destination's own backend.
// Every runner takes them in policy order, the primary's first, so no two runners wait on each other
// in a circle; a runner that finds one held by someone else gives back what it took and leaves the
// key alone (busy). Another runner's lock is taken over only once it expired, by the policy's clock
// skew beyond its expiry (the backend judges; a takeover is reported on the lock, `tookOver`), or
// at once when its holder is proven dead (issue 30): a request with `proveHolderDead` asks it about
// a busy lock's owner and, on a proof, asks the backend once more with that owner in
// `deadOwners`, the same compare-and-swap a stale lock's takeover makes. A lock that changed hands
// meanwhile (a live runner took it) is not the dead owner's, and stays busy.
//
// Invariant 9, fenced locks: a runner that lost its lock can no longer roll or write. Long work (a
// rotation: roll → store → verify) keeps its locks alive with a LockKeeper (lock-keeper.ts), which
// proves the lease before each roll attempt, and every write to a destination carries that
// destination's own lock as its fence, checked by the backend (a backend can only check a lock it
// holds itself). A lock found lost is not given back: it is someone else's now.
//
// Which locks: a rotation locks every destination, because every destination receives the new
// secret. Work that writes only bookkeeping to the primary (a drift probe's record, a failure
// streak's change) locks the primary alone, and that is enough for both invariants: a rotation
// takes the primary's lock first and gives it back last, so it holds it whenever it holds any of the
// key's locks, and the only write is to the primary, whose lock the work holds.
//
// Locks are given back the last taken first, the primary's last, best effort: a lock that cannot be
// released expires by its TTL and the next runner takes it over then.
import type { LockInfo, LockOutcome, RecordDoubt } from '../backends/public/types.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import type { KeptLock, LockKeeper } from './lock-keeper.ts';
import type { HolderDeathProof, ResolvedDestination } from './types.ts';

export interface KeyLockRequest {
  key: Pick<KeyPolicy, 'lockTtlMs' | 'clockSkewMs'>;
  /** The destinations to lock, in policy order, the primary first. */
  destinations: readonly ResolvedDestination[];
  owner: string;
  rotationId: string;
  /** Asked about another runner's lock: a proof that its holder is dead, else undefined (RotationDeps.holderProver). */
  proveHolderDead?: (holder: LockInfo) => Promise<HolderDeathProof | undefined>;
}

/** A lock taken over from a holder proven dead. */
export interface DeadHolder {
  holder: LockInfo;
  proof: HolderDeathProof;
  at: ResolvedDestination;
}

export type KeyLockTake =
  /** Every lock asked for, in the order taken; `deadHolders`: those taken from holders proven dead. */
  | { held: KeptLock[]; deadHolders: DeadHolder[] }
  /** Another runner holds the lock of `at`; `heldBefore` locks had been taken (and were given back). */
  | { busy: LockInfo; at: ResolvedDestination; heldBefore: number; doubts?: RecordDoubt[] };

/** Takes the key's locks at `destinations`, in order; a lock taken before a busy one or an error is given back. */
export async function takeKeyLock(request: KeyLockRequest): Promise<KeyLockTake> {
  const { key, owner, rotationId } = request;
  const lockRequest = { owner, rotationId, ttlMs: key.lockTtlMs, clockSkewMs: key.clockSkewMs };
  const held: KeptLock[] = [];
  const deadHolders: DeadHolder[] = [];
  for (const destination of request.destinations) {
    let locked: LockOutcome;
    try {
      locked = await destination.backend.acquireLock(destination.target, lockRequest);
      if (!locked.acquired && request.proveHolderDead !== undefined && locked.holder.owner !== owner) {
        const holder = locked.holder;
        const proof = await request.proveHolderDead(holder);
        if (proof !== undefined) {
          locked = await destination.backend.acquireLock(destination.target, {
            ...lockRequest,
            deadOwners: [holder.owner],
          });
          // Audited only when this was the takeover (not a lock released meanwhile and taken fresh).
          if (locked.acquired && locked.lock.tookOver) deadHolders.push({ holder, proof, at: destination });
        }
      }
    } catch (error) {
      await releaseKeyLock(held);
      throw error;
    }
    if (!locked.acquired) {
      await releaseKeyLock(held);
      return {
        busy: locked.holder,
        at: destination,
        heldBefore: held.length,
        ...(locked.doubts === undefined ? {} : { doubts: locked.doubts }),
      };
    }
    held.push({ destination, lock: locked.lock });
  }
  return { held, deadHolders };
}

/**
 * Gives back `locks`, the last taken first. Best effort: a release that fails is handed to
 * `onError` (when given) and the rest still go. True when every lock was released.
 */
export async function releaseKeyLock(
  locks: readonly KeptLock[],
  onError?: (destination: ResolvedDestination, error: unknown) => void,
): Promise<boolean> {
  let released = true;
  for (const { destination, lock } of [...locks].reverse()) {
    try {
      await destination.backend.releaseLock(destination.target, lock);
    } catch (error) {
      released = false;
      onError?.(destination, error);
    }
  }
  return released;
}

/**
 * The end of long work: stops keeping the locks alive and gives them back as last refreshed.
 * Undefined when the keeper found them lost (nothing of ours to give back); else releaseKeyLock's answer.
 */
export async function releaseKeptKeyLock(
  keeper: LockKeeper,
  onError?: (destination: ResolvedDestination, error: unknown) => void,
): Promise<boolean | undefined> {
  keeper.stop();
  if (keeper.lost) return undefined;
  return releaseKeyLock(keeper.locks, onError);
}

/**
 * Short work under the key's locks: takes them, runs `body`, gives them back whatever `body` did.
 * `busy` with the holder when another runner has one of them. No keeper: the work must end well
 * within the lock's TTL (a probe, a bookkeeping change).
 */
export async function underKeyLock<T>(
  request: KeyLockRequest,
  body: (held: readonly KeptLock[]) => Promise<T>,
): Promise<{ busy: LockInfo } | { done: T }> {
  const taken = await takeKeyLock(request);
  if ('busy' in taken) return { busy: taken.busy };
  try {
    return { done: await body(taken.held) };
  } finally {
    await releaseKeyLock(taken.held);
  }
}
