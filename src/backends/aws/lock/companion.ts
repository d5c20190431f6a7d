// The lock companion `<name>.keyroll-lock`: a secret of its own whose AWSCURRENT value is the key
// lock (lock/value.ts). keyroll of earlier versions kept every lock here; this one keeps it here
// only for a target that has no value yet (a secret keyroll creates, or one created empty), where
// a lock version on the target itself would become its current value (AWS makes a secret's first
// version AWSCURRENT whatever label it asks for). Once a target has a value its lock moves onto it
// (lock/target.ts), and the companion is sealed first (`closeCompanion`).
// Every change is atomic:
// - the first lock ever is CreateSecret, which fails with ResourceExistsException for all but one caller;
// - every later change (take a free or stale lock, refresh our own, release, seal) is a
//   compare-and-swap: put the new value as a version labelled KEYROLL_CANDIDATE (not current), then
//   UpdateSecretVersionStage moves AWSCURRENT to it only if AWSCURRENT is still on the version
//   read; AWS refuses the move otherwise, so of two runners changing the same value exactly one wins.
// Releasing writes a `released` value rather than deleting the secret: a deleted secret name stays
// reserved for its recovery window (and deletion is asynchronous even when forced), which would
// block the next CreateSecret.
import { randomUUID } from 'node:crypto';
import { BackendError } from '../../errors.ts';
import type { BackendOperation } from '../../errors.ts';
import type { LockInfo, LockRequest, RecordDoubt } from '../../types.ts';
import { creationTags } from '../record-tags.ts';
import { secretNameOf } from '../target.ts';
import {
  MAX_ROUNDS,
  SEALED,
  blockingHolder,
  busyOutcome,
  isOurs,
  isSealed,
  outcomeUnknown,
  readLockVersion,
  releasedByRecord,
  type CurrentLock,
  type LockContext,
  type LockPlace,
  type LockValue,
  type SwapOutcome,
} from './value.ts';

export const LOCK_SUFFIX = '.keyroll-lock';
/** The label that keeps a lock candidate version out of AWSCURRENT until the CAS moves it. */
export const CANDIDATE_STAGE = 'KEYROLL_CANDIDATE';

/**
 * The name of the lock companion of a secret given by name or full ARN. It lives in the
 * client's account and region, beside a secret of the same account.
 */
export function lockSecretName(path: string): string {
  return `${secretNameOf(path)}${LOCK_SUFFIX}`;
}

/** How an operator frees a companion lock (docs/runbook.md, "Clearing a stale lock"); never by deleting it. */
const FREE_IT =
  'to free it, write a released value (aws secretsmanager put-secret-value --secret-string \'{"state":"released","owner":"operator","rotationId":"manual-release","releasedAt":"<ISO time>"}\', see the runbook); never delete it: a deleted name stays reserved for 7-30 days and blocks every later lock';

/** The companion of the target at `path`, as a lock place. */
export function companionPlace(context: LockContext, path: string): LockPlace {
  const lockName = lockSecretName(path);
  const place: LockPlace = {
    kind: 'companion',
    secretId: lockName,
    targetName: secretNameOf(path),
    read: (operation) => readCompanion(context, place, operation),
    create: async (value, operation) => {
      const created = await createCompanion(context, place, value);
      return created !== undefined
        ? { won: true, versionId: created }
        : { won: false, now: await readCompanion(context, place, operation) };
    },
    swap: (expected, value, operation) => swapCompanion(context, place, expected, value, operation),
    errorOf: (error, operation) => companionErrorOf(context, lockName, error, operation),
  };
  return place;
}

function readCompanion(
  context: LockContext,
  place: LockPlace,
  operation: BackendOperation,
): Promise<CurrentLock | undefined> {
  return readLockVersion(context, place, 'AWSCURRENT', operation, FREE_IT);
}

/** Creates the companion holding `value`; the version id, or undefined when it already exists. */
async function createCompanion(
  context: LockContext,
  place: LockPlace,
  value: LockValue,
): Promise<string | undefined> {
  try {
    const answer = await context.calls.createSecret('lock', {
      Name: place.secretId,
      Description:
        'keyroll rotation lock; holds no secret. Never delete it (a deleted name stays reserved and blocks every later lock); to free it, write a released value (see the keyroll runbook).',
      SecretString: JSON.stringify(value),
      // A fresh token per attempt: the SDK's own retry of this call resends it, so a create whose
      // answer was lost is recognised as ours instead of as someone else's lock.
      ClientRequestToken: randomUUID(),
      ...(context.kmsKeyId === undefined ? {} : { KmsKeyId: context.kmsKeyId }),
      Tags: creationTags(context.tags),
    });
    const versionId = answer.VersionId ?? invalidAnswer(context, place.secretId);
    context.sightings?.set(place, { versionId, value });
    return versionId;
  } catch (error) {
    if (error instanceof BackendError && error.code === 'KR_BACKEND_CONFLICT') return undefined;
    throw error;
  }
}

function invalidAnswer(context: LockContext, lockName: string): never {
  throw new BackendError(
    'KR_BACKEND_INVALID_RESPONSE',
    `aws CreateSecret on ${lockName} answered without a VersionId`,
    {
      backend: context.backendName,
      kind: 'aws',
      operation: 'lock',
      path: lockName,
    },
  );
}

async function swapCompanion(
  context: LockContext,
  place: LockPlace,
  expected: string,
  value: LockValue,
  operation: BackendOperation,
): Promise<SwapOutcome> {
  const candidate = randomUUID();
  await context.calls.putSecretValue(operation, {
    SecretId: place.secretId,
    SecretString: JSON.stringify(value),
    ClientRequestToken: candidate,
    VersionStages: [CANDIDATE_STAGE],
  });
  const moved = await context.calls.moveCurrentStage(operation, place.secretId, expected, candidate);
  if (moved === 'moved') {
    context.sightings?.set(place, { versionId: candidate, value });
    return { won: true, versionId: candidate };
  }
  // A refused move may also be the SDK's retry of a move whose first answer was lost: the label
  // then already sits on our candidate. Only a re-read tells the two apart.
  const now = await readCompanion(context, place, operation);
  return now?.versionId === candidate ? { won: true, versionId: candidate } : { won: false, now };
}

/** The error for a companion scheduled for deletion (someone deleted it), naming the repair. */
function companionErrorOf(
  context: LockContext,
  lockName: string,
  error: unknown,
  operation: BackendOperation,
): unknown {
  if (!(error instanceof BackendError) || error.code !== 'KR_BACKEND_SCHEDULED_FOR_DELETION') return error;
  return new BackendError(
    'KR_BACKEND_SCHEDULED_FOR_DELETION',
    `aws lock secret ${lockName} is scheduled for deletion, so no runner can take the key's lock: restore it (aws secretsmanager restore-secret --secret-id ${lockName}), then write a released value if it is still held; never delete a lock secret`,
    {
      backend: context.backendName,
      kind: 'aws',
      operation,
      path: lockName,
      ...(error.status === undefined ? {} : { status: error.status }),
    },
  );
}

/** What closing the companion found: another runner's live lock there, or the companion sealed. */
export type CompanionGate = { busy: LockInfo; doubts?: RecordDoubt[] } | { sealed: true; tookOver: boolean };

/**
 * Seals the companion of a target that has a value, before the target's first own lock (invariants
 * 5 and 9 across versions). A keyroll of an earlier version takes only the companion, and reads
 * nothing on the target; so before any lock lives on the target, the companion must be free and
 * then sealed (SEALED: held for ever), atomically, by its create or compare-and-swap. From then on an
 * earlier keyroll finds the key busy for good, and this version finds the lock on the target.
 * Reading alone would not do: an earlier runner could take the companion right after the read.
 * A companion that is missing is created sealed (an earlier keyroll would create it otherwise).
 * Busy while another runner (of any version) holds the companion and it is not stale; a stale one
 * is taken over (`tookOver`: its runner may still act, invariant 9). `readReleaseMark` reads the
 * target's tags once more before answering busy (a finish record may have given that lock back).
 */
export async function closeCompanion(
  context: LockContext,
  path: string,
  request: LockRequest,
  readReleaseMark: () => Promise<void>,
): Promise<CompanionGate> {
  const place = companionPlace(context, path);
  try {
    return await seal(context, place, request, readReleaseMark);
  } catch (error) {
    throw place.errorOf(error, 'lock');
  }
}

async function seal(
  context: LockContext,
  place: LockPlace,
  request: LockRequest,
  readReleaseMark: () => Promise<void>,
): Promise<CompanionGate> {
  // Read first: once per target, and most targets that meet it (an upgrade) have a companion.
  let current: CurrentLock | undefined = await place.read('lock');
  let askedForMark = false;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    if (current === undefined) {
      const created = await place.create(SEALED, 'lock');
      if (created.won) return { sealed: true, tookOver: false };
      current = created.now;
      continue;
    }
    if (isSealed(current.value)) return { sealed: true, tookOver: false };
    let holder = blockingHolder(
      current.value,
      request,
      context.now(),
      releasedByRecord(context, place, current.value),
    );
    if (holder !== undefined && !askedForMark) {
      askedForMark = true;
      await readReleaseMark();
      holder = blockingHolder(
        current.value,
        request,
        context.now(),
        releasedByRecord(context, place, current.value),
      );
    }
    if (holder !== undefined) {
      const { holder: busy, doubts } = busyOutcome(context, place, holder);
      return { busy, ...(doubts === undefined ? {} : { doubts }) };
    }
    const tookOver =
      current.value.state === 'held' &&
      !isOurs(current.value, request) &&
      !releasedByRecord(context, place, current.value);
    let swap: SwapOutcome;
    try {
      swap = await place.swap(current.versionId, SEALED, 'lock');
    } catch (error) {
      // An answer lost on the way: the seal may have landed. The read back decides; a takeover it
      // made keeps saying so, or a marker its runner left could be cleared too soon (invariant 9).
      if (!outcomeUnknown(error)) throw error;
      const now = await place.read('lock');
      if (now !== undefined && isSealed(now.value)) return { sealed: true, tookOver };
      throw error;
    }
    if (swap.won) return { sealed: true, tookOver };
    current = swap.now;
  }
  throw new BackendError(
    'KR_BACKEND_CONFLICT',
    `aws lock secret ${place.secretId} kept changing while keyroll sealed it`,
    {
      backend: context.backendName,
      kind: 'aws',
      operation: 'lock',
      path: place.secretId,
    },
  );
}
