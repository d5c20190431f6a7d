// The fenced write of a destination under its lock (invariant 9): a runner that lost the lock must
// not make its secret the one consumers read, and above all never replace what the new holder
// stored. Secrets Manager has no write conditioned on another secret (the lock companion), so the
// fence is the target's own AWSCURRENT label, moved by compare-and-swap:
// 1. PutSecretValue with the rotation's ClientRequestToken and VersionStages [KEYROLL_PENDING]:
//    the value is durable after this first request (invariants 2 and 4), but not AWSCURRENT.
//    (On a missing target: CreateSecret with the value, atomic since it fails when the name
//    exists; on a secret created empty by the intent marker, AWS makes the first version
//    AWSCURRENT itself. A first value has nothing to replace, and the holder's write after it moves
//    AWSCURRENT on, as in 3.)
// 2. Is the lock still ours? Known without a request while this process holds it with margin left
//    (known.ts: another runner takes it over only past its expiry plus the clock skew), else read
//    where it lives (lock/lock.ts): on the target, its description says so while KEYROLL_LOCK is still on
//    the version this process wrote; in the companion, the lock is read. Held by this owner and
//    rotation, whatever its expiry, means nobody took it over. Not ours: KR_LOCK_LOST (not
//    retryable); nothing visible changed.
// 3. UpdateSecretVersionStage AWSCURRENT to our version with RemoveFromVersionId = the version
//    AWSCURRENT was on when this process read the target under the lock (readState). AWS refuses
//    the move when AWSCURRENT moved since, and moves AWSPREVIOUS to the version it left.
// A refused move is evidence that someone wrote: local facts are no longer trusted, and the lock
// and the target are read. Lost lock: KR_LOCK_LOST. Still ours: the version that got in was written
// without the lock (a runner that lost it and passed step 2 before the takeover, or a hand-made
// change); the holder's secret is the live one, so the move is retried from the version now current.
// So the holder's write always ends as AWSCURRENT, and a runner whose lock was taken over lands
// nothing once the new holder wrote (its move from the old version is refused), nor once its
// step 2 sees the takeover. What stays possible: a runner paused between step 2 and step 3 lands
// its value before the new holder writes; the holder's write then replaces it.
// Idempotent (invariant 8): a retry in this process first reads the version named by the token;
// AWSCURRENT already → alreadyApplied; durable but not current (an attempt refused or cut between
// its put and its move) → steps 2-3 again, so a refused write is refused again.
// The KEYROLL_PENDING label stays on the last fenced version (the current one, or a refused one)
// until the next fenced write moves it: a label on a version keeps AWS from pruning it, and
// removing it would cost a request per rotation.
import { BackendError } from '../errors.ts';
import { renderText } from '../render.ts';
import type { SecretRecord, StoreTarget, WriteFence, WriteResult } from '../types.ts';
import type { HeldFacts } from './known.ts';
import { currentLockOf } from './lock/lock.ts';
import { MAX_ROUNDS, isOurs, type CurrentLock, type LockContext } from './lock/value.ts';
import { currentVersionOf, describeTarget } from './records.ts';
import { clientRequestToken, putOrCreate, readVersion, tokenInUse, type WriteContext } from './write.ts';

/** The label a fenced write's version carries until AWSCURRENT is moved to it. */
export const PENDING_STAGE = 'KEYROLL_PENDING';

export interface FencedWriteContext extends WriteContext {
  held: HeldFacts;
  lock: LockContext;
}

export async function writeFenced(
  context: FencedWriteContext,
  target: StoreTarget,
  record: SecretRecord,
  fence: WriteFence,
): Promise<WriteResult> {
  const path = target.path;
  const value = renderText(target.shape, record);
  const token = clientRequestToken(record.rotationId);
  if (context.attempts.record(path, token)) {
    const earlier = await readVersion(context, path, token);
    if (earlier !== undefined) {
      if (earlier.value !== value) throw tokenInUse(context, path, token);
      if (earlier.current) return { version: token, alreadyApplied: true };
      return promote(context, path, token, fence);
    }
  }
  const landed = await putOrCreate(context, path, value, token, [PENDING_STAGE]);
  context.targets.wroteValue(path);
  if (landed.current) {
    context.held.observeCurrent(path)(landed.version);
    return { version: landed.version, alreadyApplied: false };
  }
  return promote(context, path, token, fence);
}

/** Steps 2 and 3: moves AWSCURRENT to `token` while the lock is ours. */
async function promote(
  context: FencedWriteContext,
  path: string,
  token: string,
  fence: WriteFence,
): Promise<WriteResult> {
  // undefined: what AWSCURRENT is on, and whether the lock is ours, must be read.
  let base = context.held.holds(path, fence.lock) ? context.held.current(path) : undefined;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    if (base === undefined) {
      const described = describeTarget(context, path, 'write');
      const [lock, description] = await Promise.all([
        currentLockOf(context.lock, path, fence.lock, described),
        described,
      ]);
      const current = description === undefined ? null : (currentVersionOf(description) ?? null);
      // Ours already: the SDK's retry of a move whose first answer was lost.
      if (current === token) return { version: token, alreadyApplied: false };
      if (!heldBy(lock, fence)) {
        context.held.dropIfFor(path, fence.lock);
        throw lockLost(context, path, token, lock);
      }
      base = current;
    }
    if ((await context.calls.moveCurrentStage('write', path, base ?? undefined, token)) === 'moved') {
      context.held.observeCurrent(path)(token);
      return { version: token, alreadyApplied: false };
    }
    base = undefined;
  }
  throw new BackendError(
    'KR_BACKEND_CONFLICT',
    `aws secret ${path}: AWSCURRENT kept moving while keyroll moved it to version ${token}`,
    {
      backend: context.backendName,
      kind: 'aws',
      operation: 'write',
      path,
    },
  );
}

function heldBy(lock: CurrentLock | undefined, fence: WriteFence): boolean {
  return lock?.value.state === 'held' && isOurs(lock.value, fence.lock);
}

function lockLost(
  context: FencedWriteContext,
  path: string,
  token: string,
  lock: CurrentLock | undefined,
): BackendError {
  const now =
    lock === undefined
      ? 'no lock secret'
      : lock.value.state === 'held'
        ? `held by ${lock.value.owner} for rotation ${lock.value.rotationId}`
        : 'released';
  return new BackendError(
    'KR_LOCK_LOST',
    `aws secret ${path}: this runner no longer holds the key lock (${now}); its value stays version ${token} labelled ${PENDING_STAGE}, not AWSCURRENT`,
    { backend: context.backendName, kind: 'aws', operation: 'write', path },
  );
}
