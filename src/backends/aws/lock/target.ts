// The key lock on the target secret itself: the version that carries the staging label
// KEYROLL_LOCK, whose value is the lock's JSON (lock/value.ts: an owner, a rotation, an expiry; never
// a secret). Consumers read AWSCURRENT and readPrevious reads AWSPREVIOUS; a lock version carries
// neither (AWS moves those two only when AWSCURRENT moves), so the lock changes nothing anyone reads.
// Why on the target (issue 19): its compare-and-swap is a PutSecretValue and an
// UpdateSecretVersionStage on the very secret the fenced write puts into and moves AWSCURRENT on,
// so taking the lock proves both permissions there before the roll (invariant 1, with the KMS key
// of the secret too, which the earlier refused-token probe could not prove), and the preflight's
// two write probes are not sent: a rotation spends 4 of the account's write quota, not 6.
// - The first lock of a target is one PutSecretValue with a fixed ClientRequestToken
//   (FIRST_LOCK_TOKEN) and the label itself: AWS makes a token a version id once, so of several
//   runners putting the first lock at once exactly one succeeds (the others, with another value,
//   get ResourceExistsException and read what won). It is sent only on a description less than an
//   hour old that showed no label (known.ts): a first lock put since is younger than that, and AWS
//   prunes no version younger than 24 hours, so it still exists (and refuses the token) even when
//   the label has moved on from it.
// - Every later change (take a free or stale lock, refresh our own, release) is the compare-and-swap:
//   put the new value as a version labelled KEYROLL_LOCK_CANDIDATE, then UpdateSecretVersionStage
//   moves KEYROLL_LOCK to it from the version read; AWS refuses the move when the label has left it.
// Only on a target that has a value: AWS makes a secret's first version AWSCURRENT whatever label
// the put asks for, so a target without one locks in its companion (lock/companion.ts). A lock put
// that comes back AWSCURRENT anyway (the secret was deleted and re-created empty in between) is an
// error that names the repair; nothing is rolled.
// Each change adds a version to the secret. AWS removes unlabelled versions beyond 100 that are older
// than a day, and asks for at most one new version every 10 minutes on average: nothing in keyroll
// takes a key's lock on a schedule (drift probes and quarantine reminders take it only when they
// found something to change), so a key's versions grow with its rotations, a few a day at most.
import { randomUUID } from 'node:crypto';
import { BackendError } from '../../errors.ts';
import type { BackendOperation } from '../../errors.ts';
import type { PutSecretValueCommandOutput } from '@aws-sdk/client-secrets-manager';
import { secretNameOf } from '../target.ts';
import {
  readLockVersion,
  type CurrentLock,
  type LockContext,
  type LockPlace,
  type LockValue,
  type SwapOutcome,
} from './value.ts';

/** The label on the target's version that holds its key lock. */
export const LOCK_STAGE = 'KEYROLL_LOCK';
/** The label a lock candidate version carries until the CAS moves KEYROLL_LOCK to it. */
export const LOCK_CANDIDATE_STAGE = 'KEYROLL_LOCK_CANDIDATE';
/** The version id of a target's first lock (a ClientRequestToken: 32 to 64 characters). */
export const FIRST_LOCK_TOKEN = 'keyroll-lock-first-version-00000000000';

/** How an operator frees a lock on the target (docs/runbook.md, "Clearing a stale lock"). */
function freeIt(name: string): string {
  return `to free it, put a released value under the label: aws secretsmanager put-secret-value --secret-id ${name} --version-stages ${LOCK_STAGE} --secret-string '{"state":"released","owner":"operator","rotationId":"manual-release","releasedAt":"<ISO time>"}' (see the runbook); the label never goes on AWSCURRENT`;
}

/**
 * The lock of a target whose first lock exists (its version id is taken) while no version carries
 * KEYROLL_LOCK: the label was removed by hand (the compare-and-swap only ever moves it). Whose lock
 * it was, and until when, is not known any more, so keyroll takes no lock here (invariant 5): a
 * fresh one could be a second holder beside a live runner, which cannot keep the lock either (its
 * refresh and its fenced write find the label gone: KR_LOCK_LOST). An operator puts the label back
 * on a released value once no runner holds the lock (docs/runbook.md, "A removed lock label").
 */
function labelRemoved(context: LockContext, name: string, operation: BackendOperation): BackendError {
  return new BackendError(
    'KR_BACKEND_INVALID_RESPONSE',
    `aws secret ${name}: its key lock's staging label ${LOCK_STAGE} was removed by hand (no version carries it, and the first lock exists), so keyroll cannot tell whether a runner holds the lock and takes none; once no keyroll runner rotates this key (or lockTtl has passed since the label was removed), ${freeIt(name)}`,
    { backend: context.backendName, kind: 'aws', operation, path: name },
  );
}

/** The version carrying KEYROLL_LOCK in a description's labels, or undefined when none does. */
export function lockVersionOf(
  stages: Readonly<Record<string, readonly string[]>> | undefined,
): string | undefined {
  return Object.entries(stages ?? {}).find(([, labels]) => labels.includes(LOCK_STAGE))?.[0];
}

/** The target at `path` as a lock place. */
export function targetPlace(context: LockContext, path: string): LockPlace {
  const name = secretNameOf(path);
  const place: LockPlace = {
    kind: 'target',
    secretId: path,
    targetName: name,
    read: (operation) => readTargetLock(context, place, operation),
    create: async (value, operation) => {
      // Refused when the first lock exists already (another runner's, or our own earlier attempt's): read it.
      if (
        (await putLockVersion(context, place, value, FIRST_LOCK_TOKEN, LOCK_STAGE, operation)) === 'exists'
      ) {
        const now = await readTargetLock(context, place, operation);
        if (now === undefined) throw labelRemoved(context, place.secretId, operation);
        return { won: false, now };
      }
      context.sightings?.set(place, { versionId: FIRST_LOCK_TOKEN, value });
      return { won: true, versionId: FIRST_LOCK_TOKEN };
    },
    swap: (expected, value, operation) => swapTargetLock(context, place, expected, value, operation),
    errorOf: (error) => error,
  };
  return place;
}

function readTargetLock(
  context: LockContext,
  place: LockPlace,
  operation: BackendOperation,
): Promise<CurrentLock | undefined> {
  // None when no version carries the label (or no secret at all: the caller's description tells which).
  return readLockVersion(context, place, LOCK_STAGE, operation, freeIt(place.targetName));
}

/**
 * Puts `value` as the version `token` labelled `stage`: 'exists' when AWS refused the token (a
 * version of that id holds another value). A put that came back AWSCURRENT is an error.
 */
async function putLockVersion(
  context: LockContext,
  place: LockPlace,
  value: LockValue,
  token: string,
  stage: string,
  operation: BackendOperation,
): Promise<'put' | 'exists'> {
  let answer: PutSecretValueCommandOutput;
  try {
    answer = await context.calls.putSecretValue(operation, {
      SecretId: place.secretId,
      SecretString: JSON.stringify(value),
      ClientRequestToken: token,
      VersionStages: [stage],
    });
  } catch (error) {
    if (error instanceof BackendError && error.code === 'KR_BACKEND_CONFLICT') return 'exists';
    throw error;
  }
  if (answer.VersionStages?.includes('AWSCURRENT') === true) {
    throw new BackendError(
      'KR_BACKEND_CONFLICT',
      `aws secret ${place.secretId} had no value when keyroll put its lock there (deleted and created again empty?), so the lock became its current value: nothing was rolled; put the secret's value back (or delete the secret and let keyroll create it), then rotate again`,
      { backend: context.backendName, kind: 'aws', operation, path: place.secretId },
    );
  }
  return 'put';
}

async function swapTargetLock(
  context: LockContext,
  place: LockPlace,
  expected: string,
  value: LockValue,
  operation: BackendOperation,
): Promise<SwapOutcome> {
  const candidate = randomUUID();
  // A fresh token never names an existing version; were it refused all the same, the change lost.
  if ((await putLockVersion(context, place, value, candidate, LOCK_CANDIDATE_STAGE, operation)) === 'exists')
    return { won: false, now: await readTargetLock(context, place, operation) };
  const moved = await context.calls.moveStage(operation, place.secretId, LOCK_STAGE, expected, candidate);
  if (moved === 'moved') {
    context.sightings?.set(place, { versionId: candidate, value });
    return { won: true, versionId: candidate };
  }
  // A refused move may also be the SDK's retry of a move whose first answer was lost: the label
  // then already sits on our candidate. Only a re-read tells the two apart.
  const now = await readTargetLock(context, place, operation);
  return now?.versionId === candidate ? { won: true, versionId: candidate } : { won: false, now };
}
