// The key lock (invariant 5) for an AWS destination: who holds it, until when (lock/value.ts), and
// where it lives:
// - on the target secret itself, as the version labelled KEYROLL_LOCK (lock/target.ts), for every
//   target that has a value: the lock's compare-and-swap is then the proof, before the roll, that
//   the fenced write's two calls are allowed on that secret (invariant 1);
// - in the companion secret `<name>.keyroll-lock` (lock/companion.ts) for a target without a value
//   yet, where a lock version would become the secret's value; and in every earlier keyroll, which
//   is why a target's first own lock waits until its companion is free and seals it
//   (`closeCompanion`): runners of both versions exclude each other during an upgrade.
// The same rounds take the lock at either place: create the first lock, or read it, or start from a
// value this process already knows; take it when free, stale or ours; a lost compare-and-swap reads
// what won and decides again. A lock change whose answer is lost may have landed: it is read back,
// and one that carries this request's owner, rotation and expiry is ours and returned as acquired,
// so a caller never holds a lock it does not know about (and never leaves one behind for a TTL).
// Requests saved without weakening any of this: the CAS needs only the version it replaces, never
// a read of its own. So acquiring starts from the lock value this process last saw or wrote when
// that value was free (the preflight reads the target's lock; a released lock it gave back itself),
// and releasing starts from the version this process holds (HeldLock.token); AWS refuses the move
// when that version no longer carries the label, and only then is the lock read.
// A finished rotation gives its lock back without a request of its own: the finish step's
// TagResource on the target names the lock and proves it (`keyroll:lock-released` = owner, rotation
// and the release key whose digest the lock value carries, record-tags.ts, lock/value.ts), and that
// lock value is free from then on. A mark without the key frees nothing (anyone who may tag the
// secret can write one: issue 27). The holder
// writes nothing under the lock after that record; a reader that saw the target's tags before it
// answers busy (or reads them once more). Refreshing is lock/refresh.ts.
import type { DescribeSecretCommandOutput } from '@aws-sdk/client-secrets-manager';
import { BackendError } from '../../errors.ts';
import type { HeldLock, LockInfo, LockOutcome, LockRequest } from '../../types.ts';
import type { TargetSeen } from '../known.ts';
import { closeCompanion, companionPlace } from './companion.ts';
import { lockVersionOf, targetPlace } from './target.ts';
import {
  MAX_ROUNDS,
  blockingHolder,
  busyOutcome,
  holderOf,
  isOurs,
  isSealed,
  landedLock,
  lockToken,
  newReleaseKey,
  parseLockToken,
  releaseDigestOf,
  releasedByRecord,
  type CurrentLock,
  type HeldValue,
  type LockContext,
  type LockPlace,
  type LockValue,
  type SwapOutcome,
} from './value.ts';

export interface AcquireHints {
  /** The target as this process described it last, when recent enough to decide on (known.ts). */
  seen?: TargetSeen | undefined;
  /**
   * Describes the target now: its labels say where its lock lives, its tags which lock a finish
   * record gave back (`keyroll:lock-released`, into the sightings). Also asked once when a freshly
   * read lock is held by another rotation, which may have given it back since the tags were read.
   */
  describe: () => Promise<TargetSeen>;
}

export async function acquireLock(
  context: LockContext,
  path: string,
  request: LockRequest,
  hints: AcquireHints,
): Promise<LockOutcome> {
  let seen = hints.seen ?? (await hints.describe());
  const readReleaseMark = async (): Promise<void> => {
    await hints.describe();
  };
  for (let attempt = 0; attempt < 2; attempt++) {
    if (seen.hasValue) return acquireOnTarget(context, path, request, seen.lockOnTarget, readReleaseMark);
    const place = companionPlace(context, path);
    const outcome = await atPlace(place, 'lock', () =>
      takeAt(context, place, request, { fallback: seen.exists ? 'read' : 'create', readReleaseMark }),
    );
    if (outcome !== 'moved') return outcome;
    // The companion is sealed: the lock moved onto the target, which has a value by now.
    seen = await hints.describe();
  }
  throw new BackendError(
    'KR_BACKEND_CONFLICT',
    `aws secret ${path}: its lock companion is sealed (the lock moved onto the secret) but the secret has no value to carry the lock`,
    {
      backend: context.backendName,
      kind: 'aws',
      operation: 'lock',
      path,
    },
  );
}

/** The lock on a target that has a value: its companion sealed first when the target carries no lock yet. */
async function acquireOnTarget(
  context: LockContext,
  path: string,
  request: LockRequest,
  lockOnTarget: boolean,
  readReleaseMark: () => Promise<void>,
): Promise<LockOutcome> {
  let tookOverCompanion = false;
  if (!lockOnTarget) {
    const gate = await closeCompanion(context, path, request, readReleaseMark);
    if ('busy' in gate)
      return {
        acquired: false,
        holder: gate.busy,
        ...(gate.doubts === undefined ? {} : { doubts: gate.doubts }),
      };
    tookOverCompanion = gate.tookOver;
  }
  const place = targetPlace(context, path);
  const outcome = await atPlace(place, 'lock', () =>
    takeAt(context, place, request, { fallback: lockOnTarget ? 'read' : 'create', readReleaseMark }),
  );
  if (outcome === 'moved') throw new Error('unreachable: a target never holds the seal');
  // A stale lock of an earlier keyroll taken over in the companion is a takeover all the same.
  return outcome.acquired && tookOverCompanion
    ? { acquired: true, lock: { ...outcome.lock, tookOver: true } }
    : outcome;
}

async function atPlace<T>(
  place: LockPlace,
  operation: 'lock' | 'unlock' | 'state',
  work: () => Promise<T>,
): Promise<T> {
  try {
    return await work();
  } catch (error) {
    throw place.errorOf(error, operation);
  }
}

/**
 * How a round starts: create the first lock, read it, or go straight to the CAS from a value
 * already known. `fresh` is false for a value remembered from an earlier call: such a value is
 * tried only when free (the CAS refuses it if it is no longer current), and never answers "busy"
 * without a new read.
 */
type RoundStart = { by: 'create' } | { by: 'read' } | { by: 'known'; lock: CurrentLock; fresh: boolean };

function firstRound(
  context: LockContext,
  place: LockPlace,
  request: LockRequest,
  fallback: 'create' | 'read',
): RoundStart {
  const seen = context.sightings?.get(place);
  if (seen === 'missing') return { by: place.kind === 'companion' ? 'create' : fallback };
  if (seen === undefined) return { by: fallback };
  const blocked =
    isSealed(seen.value) ||
    blockingHolder(seen.value, request, context.now(), releasedByRecord(context, place, seen.value)) !==
      undefined;
  return blocked ? { by: 'read' } : { by: 'known', lock: seen, fresh: false };
}

/** The rounds that take the lock at `place`; 'moved' when the place is a sealed companion. */
// eslint-disable-next-line max-lines-per-function -- one takeover's conditional-write rounds (read, judge the holder, write, re-read), each failure handled at the round it happens in
async function takeAt(
  context: LockContext,
  place: LockPlace,
  request: LockRequest,
  options: { fallback: 'create' | 'read'; readReleaseMark: () => Promise<void> },
): Promise<LockOutcome | 'moved'> {
  let start = firstRound(context, place, request, options.fallback);
  let askedForMark = false;
  // The key that gives this lock back with the finish record; the value carries only its digest.
  const releaseKey = newReleaseKey();
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const now = context.now();
    const held: HeldValue = {
      state: 'held',
      owner: request.owner,
      rotationId: request.rotationId,
      expiresAt: new Date(now.getTime() + request.ttlMs).toISOString(),
      releaseDigest: releaseDigestOf(releaseKey),
    };
    let current: CurrentLock | undefined;
    let fresh = true;
    if (start.by === 'create') {
      let created: SwapOutcome;
      try {
        created = await place.create(held, 'lock');
      } catch (error) {
        const ours = await landedLock(place, held, releaseKey, error, false);
        if (ours) return ours;
        throw error;
      }
      if (created.won)
        return {
          acquired: true,
          lock: {
            ...holderOf(held),
            token: lockToken(place.kind, created.versionId, releaseKey),
            tookOver: false,
          },
        };
      current = created.now;
    } else if (start.by === 'read') {
      current = await place.read('lock');
    } else {
      current = start.lock;
      fresh = start.fresh;
    }
    if (current === undefined) {
      start = { by: 'create' }; // no lock (yet, or removed by hand meanwhile): create it
      continue;
    }
    const { value } = current;
    if (place.kind === 'companion' && isSealed(value)) return 'moved';
    let holder = blockingHolder(value, request, now, releasedByRecord(context, place, value));
    if (holder !== undefined && fresh && !askedForMark) {
      // Held by another rotation: it may have given the lock back with its finish record since
      // the target's tags were read. One more read of them decides.
      askedForMark = true;
      await options.readReleaseMark();
      holder = blockingHolder(value, request, now, releasedByRecord(context, place, value));
    }
    if (holder !== undefined) {
      if (fresh) return busyOutcome(context, place, holder);
      start = { by: 'read' };
      continue;
    }

    // A lock given back with its holder's finish record is free, not taken over.
    const tookOver =
      value.state === 'held' && !isOurs(value, request) && !releasedByRecord(context, place, value);
    let swap: SwapOutcome;
    try {
      swap = await place.swap(current.versionId, held, 'lock');
    } catch (error) {
      const ours = await landedLock(place, held, releaseKey, error, tookOver);
      if (ours) return ours;
      throw error;
    }
    if (swap.won)
      return {
        acquired: true,
        lock: { ...holderOf(held), token: lockToken(place.kind, swap.versionId, releaseKey), tookOver },
      };
    // Lost: the re-read after the refused move is the lock as it is now; decide on it directly.
    start = swap.now === undefined ? { by: 'create' } : { by: 'known', lock: swap.now, fresh: true };
  }
  throw new BackendError(
    'KR_BACKEND_CONFLICT',
    `aws key lock at ${place.secretId} kept changing while keyroll tried to take it`,
    {
      backend: context.backendName,
      kind: 'aws',
      operation: 'lock',
      path: place.secretId,
    },
  );
}

/** The place a lock this process took lives, and the version it wrote there. */
export function placeOfLock(
  context: LockContext,
  path: string,
  lock: Pick<HeldLock, 'token'>,
): { place: LockPlace; versionId: string; releaseKey?: string } {
  const { kind, versionId, releaseKey } = parseLockToken(lock.token);
  return {
    place: kind === 'target' ? targetPlace(context, path) : companionPlace(context, path),
    versionId,
    ...(releaseKey === undefined ? {} : { releaseKey }),
  };
}

/** Releases `lock` when it is still ours (same version, owner and rotation); otherwise leaves it alone. */
export async function releaseLock(context: LockContext, path: string, lock: HeldLock): Promise<void> {
  const { place, versionId } = placeOfLock(context, path, lock);
  // No read first: `lock.token` names the version this process wrote, and versions are immutable,
  // so "the label is still on that version" is exactly "the lock is still ours". The CAS moves the
  // label only from that version; a lost CAS means our lock expired and another runner took it
  // over (or it was released already): theirs now, left alone.
  const released: LockValue = {
    state: 'released',
    owner: lock.owner,
    rotationId: lock.rotationId,
    releasedAt: context.now().toISOString(),
  };
  try {
    await place.swap(versionId, released, 'unlock');
  } catch (error) {
    // No lock secret at all any more: nothing of ours left to release.
    if (error instanceof BackendError && error.code === 'KR_BACKEND_NOT_FOUND') return;
    throw place.errorOf(error, 'unlock');
  }
}

/** The lock as `readLockInfo` read it: its holder, and the value itself (undefined: no lock, or sealed). */
export interface LockView {
  /** The holder (even past expiry), or undefined when free. */
  holder?: LockInfo;
  value?: LockValue;
}

/**
 * The lock as `status` and recovery see it: the holder (even past expiry), or none when free.
 * `described` is the description of the target running beside this read: its labels say where the
 * lock lives (the target's own lock is read meanwhile, in case it is there), and a held value its
 * holder gave back with its finish record counts as free once the tags proving it were seen.
 */
export async function readLockInfo(
  context: LockContext,
  path: string,
  described: Promise<DescribeSecretCommandOutput | undefined>,
): Promise<LockView> {
  const target = targetPlace(context, path);
  const onTarget = target.read('state').then(
    (lock) => ({ lock }),
    (error: unknown) => ({ error }),
  );
  const description = await described.catch(() => undefined);
  let current: CurrentLock | undefined;
  if (lockVersionOf(description?.VersionIdsToStages) !== undefined) {
    const read = await onTarget;
    if ('error' in read) throw read.error;
    current = read.lock;
  } else {
    const companion = companionPlace(context, path);
    current = await atPlace(companion, 'state', () => companion.read('state'));
    if (current !== undefined && isSealed(current.value)) return {};
  }
  if (current === undefined) return {};
  if (current.value.state !== 'held' || releasedByRecord(context, target, current.value))
    return { value: current.value };
  return { holder: holderOf(current.value), value: current.value };
}

/** The value of a lock this process holds, as the place holds it (its release key's digest included). */
export function heldValueOf(lock: HeldLock): HeldValue {
  const { releaseKey } = parseLockToken(lock.token);
  return {
    state: 'held',
    owner: lock.owner,
    rotationId: lock.rotationId,
    expiresAt: lock.expiresAt,
    ...(releaseKey === undefined ? {} : { releaseDigest: releaseDigestOf(releaseKey) }),
  };
}

/**
 * The lock where `lock` (taken by this process) lives, as it is now, for the fenced write's check.
 * On the target, its description says it at no cost while the label is still on the version this
 * process wrote; otherwise (and in the companion) the lock is read.
 */
export async function currentLockOf(
  context: LockContext,
  path: string,
  lock: HeldLock,
  described: Promise<DescribeSecretCommandOutput | undefined>,
): Promise<CurrentLock | undefined> {
  const { place, versionId } = placeOfLock(context, path, lock);
  if (place.kind === 'target' && lockVersionOf((await described)?.VersionIdsToStages) === versionId) {
    return {
      versionId,
      value: { state: 'held', owner: lock.owner, rotationId: lock.rotationId, expiresAt: lock.expiresAt },
    };
  }
  return place.read('write');
}
