// The key lock (invariant 5) for an AWS destination: a companion secret `<name>.keyroll-lock`
// whose AWSCURRENT value says who holds the lock until when. Every change is atomic:
// - the first lock ever is CreateSecret, which fails with ResourceExistsException for all but one caller;
// - every later change (take a free or stale lock, refresh our own, release) is a compare-and-swap
//   (lock-value.ts, with the value's format and reading): put the new value as a version labelled KEYROLL_CANDIDATE (not current), then
//   UpdateSecretVersionStage moves AWSCURRENT to it only if AWSCURRENT is still on the version we
//   read; AWS refuses the move otherwise, so of two runners taking the same stale lock exactly one wins.
// Releasing writes a `released` value rather than deleting the secret: a deleted secret name stays
// reserved for its recovery window (and deletion is asynchronous even when forced), which would block
// the next CreateSecret. The companion secret therefore stays, one per destination (it is billed as
// a secret), and gains two versions per rotation; AWS prunes unlabelled versions itself.
// Another owner's lock is stale only once its expiry lies `clockSkewMs` in the past by this process's
// clock (invariant 9: the runners' clocks may disagree by that much). Refreshing (lock-refresh.ts)
// is the same CAS from the version this process holds, and never creates a lock.
// A lock change whose answer is lost (timeout, reset, 5xx) may have landed: the lock is read back,
// and one that carries this request's owner, rotation and expiry is ours and returned as acquired,
// so a caller never holds a lock it does not know about (and never leaves one behind for a TTL).
// Requests saved without weakening any of this: the CAS needs only the version it replaces, never
// a read of its own. So acquiring starts from the lock value this process last saw or wrote when
// that value was free (a released lock it gave back itself, say), and releasing starts from the
// version this process holds (HeldLock.token); AWS refuses the move when that version is no longer
// AWSCURRENT, and only then is the lock read. Lock versions are immutable, so a CAS from a version
// whose value was free succeeds only while the lock is still exactly that free value.
// A finished rotation gives its lock back without a request of its own: the finish step's
// TagResource on the target names the lock (`keyroll:lock-released` = owner and rotation, record-tags.ts),
// and a lock value of that owner and rotation is free from then on (the CAS's two writes would
// cost a rotation a quarter of its write quota). The holder writes nothing under the lock after
// that record; a reader that saw the target's tags before it answers busy (or reads them once more).
import { randomUUID } from 'node:crypto';
import { BackendError } from '../errors.ts';
import type { HeldLock, LockInfo, LockOutcome, LockRequest } from '../types.ts';
import { creationTags } from './record-tags.ts';
import {
  MAX_ROUNDS,
  compareAndSwap,
  holderOf,
  isOurs,
  landedLock,
  lockErrorOf,
  lockSecretName,
  readCurrentLock,
  type CurrentLock,
  type HeldValue,
  type LockContext,
  type LockValue,
  type SwapOutcome,
} from './lock-value.ts';

export interface AcquireHints {
  /** The target existed when last described, so its lock secret most likely exists too: read before creating. */
  lockLikelyExists: boolean;
  /**
   * Reads the target's tags again (its `keyroll:lock-released`, into the sightings): asked once
   * when a freshly read lock is held by another rotation, which may have given it back with its
   * finish record since the target was last described.
   */
  readReleaseMark?: () => Promise<void>;
}

export async function acquireLock(context: LockContext, path: string, request: LockRequest, hints: AcquireHints = { lockLikelyExists: false }): Promise<LockOutcome> {
  const lockName = lockSecretName(path);
  try {
    return await takeLock(context, lockName, request, hints);
  } catch (error) {
    throw lockErrorOf(context, lockName, error, 'lock');
  }
}

/**
 * `value` when it keeps `request` out at `now`: held by another owner or rotation, and not stale,
 * i.e. `now` is not yet past its expiry plus the runners' allowed clock skew; else undefined.
 */
function blockingHolder(value: LockValue, request: LockRequest, now: Date, released: boolean): HeldValue | undefined {
  if (value.state !== 'held' || isOurs(value, request) || released) return undefined;
  return now.getTime() > Date.parse(value.expiresAt) + (request.clockSkewMs ?? 0) ? undefined : value;
}

function releasedByRecord(context: LockContext, lockName: string, value: LockValue): boolean {
  return context.sightings?.isReleased(lockName, value) === true;
}

/**
 * How a round starts: create the lock secret (the first lock ever), read it, or go straight to the
 * CAS from a value already known. `fresh` is false for a value remembered from an earlier call:
 * such a value is tried only when free (the CAS refuses it if it is no longer current), and never
 * answers "busy" without a new read.
 */
type RoundStart = { by: 'create' } | { by: 'read' } | { by: 'known'; lock: CurrentLock; fresh: boolean };

function firstRound(context: LockContext, lockName: string, request: LockRequest, hints: AcquireHints): RoundStart {
  const seen = context.sightings?.get(lockName);
  if (seen === 'missing') return { by: 'create' };
  if (seen !== undefined) return blockingHolder(seen.value, request, context.now(), releasedByRecord(context, lockName, seen.value)) ? { by: 'read' } : { by: 'known', lock: seen, fresh: false };
  return hints.lockLikelyExists ? { by: 'read' } : { by: 'create' };
}

async function takeLock(context: LockContext, lockName: string, request: LockRequest, hints: AcquireHints): Promise<LockOutcome> {
  let start = firstRound(context, lockName, request, hints);
  let askedForMark = false;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const now = context.now();
    const held: HeldValue = {
      state: 'held',
      owner: request.owner,
      rotationId: request.rotationId,
      expiresAt: new Date(now.getTime() + request.ttlMs).toISOString(),
    };
    let current: CurrentLock | undefined;
    let fresh = true;
    if (start.by === 'create') {
      let created: string | undefined;
      try {
        created = await createLockSecret(context, lockName, held);
      } catch (error) {
        const ours = await landedLock(context, lockName, held, error, false);
        if (ours) return ours;
        throw error;
      }
      if (created !== undefined) return { acquired: true, lock: { ...holderOf(held), token: created, tookOver: false } };
      current = await readCurrentLock(context, lockName, 'lock');
    } else if (start.by === 'read') {
      current = await readCurrentLock(context, lockName, 'lock');
    } else {
      current = start.lock;
      fresh = start.fresh;
    }
    if (current === undefined) {
      start = { by: 'create' }; // no lock secret (yet, or deleted by hand meanwhile): create it
      continue;
    }
    const { value } = current;
    let holder = blockingHolder(value, request, now, releasedByRecord(context, lockName, value));
    if (holder !== undefined && fresh && !askedForMark && hints.readReleaseMark !== undefined) {
      // Held by another rotation: it may have given the lock back with its finish record since
      // the target's tags were read. One more read of them decides.
      askedForMark = true;
      await hints.readReleaseMark();
      holder = blockingHolder(value, request, now, releasedByRecord(context, lockName, value));
    }
    if (holder !== undefined) {
      if (fresh) return { acquired: false, holder: holderOf(holder) };
      start = { by: 'read' };
      continue;
    }

    // A lock given back with its holder's finish record is free, not taken over.
    const tookOver = value.state === 'held' && !isOurs(value, request) && !releasedByRecord(context, lockName, value);
    let swap: SwapOutcome;
    try {
      swap = await compareAndSwap(context, lockName, current.versionId, held, 'lock');
    } catch (error) {
      const ours = await landedLock(context, lockName, held, error, tookOver);
      if (ours) return ours;
      throw error;
    }
    if (swap.won) return { acquired: true, lock: { ...holderOf(held), token: swap.versionId, tookOver } };
    // Lost: the re-read after the refused move is the lock as it is now; decide on it directly.
    start = swap.now === undefined ? { by: 'create' } : { by: 'known', lock: swap.now, fresh: true };
  }
  throw new BackendError('KR_BACKEND_CONFLICT', `aws lock secret ${lockName} kept changing while keyroll tried to take it`, {
    backend: context.backendName,
    kind: 'aws',
    operation: 'lock',
    path: lockName,
  });
}

/** Creates the lock secret holding `value`; the version id, or undefined when it already exists. */
async function createLockSecret(context: LockContext, lockName: string, value: LockValue): Promise<string | undefined> {
  try {
    const answer = await context.calls.createSecret('lock', {
      Name: lockName,
      Description: 'keyroll rotation lock; holds no secret. Never delete it (a deleted name stays reserved and blocks every later lock); to free it, write a released value (see the keyroll runbook).',
      SecretString: JSON.stringify(value),
      // A fresh token per attempt: the SDK's own retry of this call resends it, so a create whose
      // answer was lost is recognised as ours instead of as someone else's lock.
      ClientRequestToken: randomUUID(),
      ...(context.kmsKeyId === undefined ? {} : { KmsKeyId: context.kmsKeyId }),
      Tags: creationTags(context.tags),
    });
    const versionId = answer.VersionId ?? invalidAnswer(context, lockName, 'CreateSecret');
    context.sightings?.set(lockName, { versionId, value });
    return versionId;
  } catch (error) {
    if (error instanceof BackendError && error.code === 'KR_BACKEND_CONFLICT') return undefined;
    throw error;
  }
}

function invalidAnswer(context: LockContext, lockName: string, action: string): never {
  throw new BackendError('KR_BACKEND_INVALID_RESPONSE', `aws ${action} on ${lockName} answered without a VersionId`, {
    backend: context.backendName,
    kind: 'aws',
    operation: 'lock',
    path: lockName,
  });
}

/** Releases `lock` when it is still ours (same version, owner and rotation); otherwise leaves it alone. */
export async function releaseLock(context: LockContext, path: string, lock: HeldLock): Promise<void> {
  const lockName = lockSecretName(path);
  try {
    await giveBack(context, lockName, lock);
  } catch (error) {
    throw lockErrorOf(context, lockName, error, 'unlock');
  }
}

async function giveBack(context: LockContext, lockName: string, lock: HeldLock): Promise<void> {
  // No read first: `lock.token` is the version this process wrote, and versions are immutable, so
  // "AWSCURRENT is still on that version" is exactly "the lock is still ours". The CAS below moves
  // AWSCURRENT only from that version; a lost CAS means our lock expired and another runner took
  // it over (or it was released already): theirs now, left alone.
  const released: LockValue = { state: 'released', owner: lock.owner, rotationId: lock.rotationId, releasedAt: context.now().toISOString() };
  try {
    await compareAndSwap(context, lockName, lock.token, released, 'unlock');
  } catch (error) {
    // No lock secret at all any more: nothing of ours left to release.
    if (error instanceof BackendError && error.code === 'KR_BACKEND_NOT_FOUND') return;
    throw error;
  }
}

/**
 * The lock as `status` and recovery see it: the holder (even past expiry), or undefined when free.
 * A held value its holder gave back with its finish record counts as free once the target's tags
 * naming it were seen: `markRead` is the read of those tags running beside this one.
 */
export async function readLockInfo(context: LockContext, path: string, markRead: Promise<unknown> = Promise.resolve()): Promise<LockInfo | undefined> {
  const lockName = lockSecretName(path);
  let current: CurrentLock | undefined;
  try {
    [current] = await Promise.all([readCurrentLock(context, lockName, 'state'), markRead]);
  } catch (error) {
    throw lockErrorOf(context, lockName, error, 'state');
  }
  if (current?.value.state !== 'held' || releasedByRecord(context, lockName, current.value)) return undefined;
  return holderOf(current.value);
}
