// The value of the AWS key lock and how it changes (lock.ts takes and gives back the lock with
// these): the JSON a lock companion `<name>.keyroll-lock` holds as its AWSCURRENT value (held by an
// owner and rotation until an expiry, or released), what this process last saw of it
// (LockSightings), reading it, and the compare-and-swap every change after the first goes through:
// put the new value as a version labelled KEYROLL_CANDIDATE (not current), then
// UpdateSecretVersionStage moves AWSCURRENT to it only if AWSCURRENT is still on the version read;
// AWS refuses the move otherwise, so of two runners changing the same value exactly one wins.
// A lock change whose answer is lost (timeout, reset, 5xx) may have landed: `landedLock` reads the
// lock back, and one that carries the request's owner, rotation and expiry is ours.
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { BackendError } from '../errors.ts';
import type { BackendOperation } from '../errors.ts';
import type { LockInfo, LockOutcome } from '../types.ts';
import type { SecretsManagerCalls } from './client.ts';
import { lockReleasedTagValue } from './record-tags.ts';
import { secretNameOf } from './target.ts';

export const LOCK_SUFFIX = '.keyroll-lock';
/** The label that keeps a lock candidate version out of AWSCURRENT until the CAS moves it. */
export const CANDIDATE_STAGE = 'KEYROLL_CANDIDATE';

const LockValue = z.discriminatedUnion('state', [
  z.object({ state: z.literal('held'), owner: z.string(), rotationId: z.string(), expiresAt: z.iso.datetime() }),
  z.object({ state: z.literal('released'), owner: z.string(), rotationId: z.string(), releasedAt: z.iso.datetime() }),
]);
export type LockValue = z.infer<typeof LockValue>;
export type HeldValue = Extract<LockValue, { state: 'held' }>;

export interface LockContext {
  calls: SecretsManagerCalls;
  backendName: string;
  kmsKeyId?: string | undefined;
  tags: Readonly<Record<string, string>>;
  now: () => Date;
  /** The last lock value this process saw or wrote, per lock secret (absent: none seen). */
  sightings?: LockSightings;
}

export interface CurrentLock {
  versionId: string;
  value: LockValue;
}

/**
 * The lock value this process last saw or wrote, per lock secret name, or 'missing' when its read
 * found no lock secret. A first guess only: every use goes through CreateSecret or the CAS, which
 * refuse a guess that is out of date.
 */
export class LockSightings {
  readonly #byName = new Map<string, CurrentLock | 'missing'>();
  /** The target's `keyroll:lock-released` value last seen (or written), per lock secret name. */
  readonly #released = new Map<string, string>();

  get(lockName: string): CurrentLock | 'missing' | undefined {
    return this.#byName.get(lockName);
  }

  set(lockName: string, sighting: CurrentLock | 'missing'): void {
    this.#byName.set(lockName, sighting);
  }

  /** Notes the release mark read from (or written to) the target's tags; undefined: none there. */
  sawReleaseMark(lockName: string, mark: string | undefined): void {
    if (mark === undefined || mark === '') this.#released.delete(lockName);
    else this.#released.set(lockName, mark);
  }

  /** True when `value` is a held lock its holder gave back with the finish step's record (record-tags.ts). */
  isReleased(lockName: string, value: LockValue): boolean {
    if (value.state !== 'held') return false;
    const mark = this.#released.get(lockName);
    return mark !== undefined && mark === lockReleasedTagValue(value);
  }
}

/**
 * The name of the lock companion of a secret given by name or full ARN. It lives in the
 * client's account and region, beside a secret of the same account.
 */
export function lockSecretName(path: string): string {
  return `${secretNameOf(path)}${LOCK_SUFFIX}`;
}

/** The lock's current value, or undefined when no lock secret exists yet. */
export async function readCurrentLock(context: LockContext, lockName: string, operation: BackendOperation): Promise<CurrentLock | undefined> {
  let answer;
  try {
    // Always by stage: the unlabelled default of GetSecretValue is AWSCURRENT in AWS, but moto
    // does not follow AWSCURRENT when UpdateSecretVersionStage moves it.
    answer = await context.calls.getSecretValue(operation, { SecretId: lockName, VersionStage: 'AWSCURRENT' });
  } catch (error) {
    if (error instanceof BackendError && error.code === 'KR_BACKEND_NOT_FOUND') {
      context.sightings?.set(lockName, 'missing');
      return undefined;
    }
    throw error;
  }
  const parsed = answer.SecretString === undefined ? undefined : LockValue.safeParse(safeJson(answer.SecretString));
  if (answer.VersionId === undefined || !parsed?.success) {
    throw new BackendError('KR_BACKEND_INVALID_RESPONSE', `aws lock secret ${lockName} holds a value keyroll did not write; ${FREE_IT}`, {
      backend: context.backendName,
      kind: 'aws',
      operation,
      path: lockName,
    });
  }
  const current = { versionId: answer.VersionId, value: parsed.data };
  context.sightings?.set(lockName, current);
  return current;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A CAS either moved AWSCURRENT to our new version, or lost and read what the lock is now. */
export type SwapOutcome = { won: true; versionId: string } | { won: false; now: CurrentLock | undefined };

/**
 * Replaces the lock value `expectedVersionId` with `value`, atomically. When another runner changed
 * the lock first, answers with the lock as it is now (read after the refused move).
 */
export async function compareAndSwap(
  context: LockContext,
  lockName: string,
  expectedVersionId: string,
  value: LockValue,
  operation: BackendOperation,
): Promise<SwapOutcome> {
  const candidate = randomUUID();
  await context.calls.putSecretValue(operation, {
    SecretId: lockName,
    SecretString: JSON.stringify(value),
    ClientRequestToken: candidate,
    VersionStages: [CANDIDATE_STAGE],
  });
  const moved = await context.calls.moveCurrentStage(operation, lockName, expectedVersionId, candidate);
  if (moved === 'moved') {
    context.sightings?.set(lockName, { versionId: candidate, value });
    return { won: true, versionId: candidate };
  }
  // A refused move may also be the SDK's retry of a move whose first answer was lost: the label
  // then already sits on our candidate. Only a re-read tells the two apart.
  const now = await readCurrentLock(context, lockName, operation);
  return now?.versionId === candidate ? { won: true, versionId: candidate } : { won: false, now };
}

export function isOurs(value: LockValue, request: { owner: string; rotationId: string }): boolean {
  return value.owner === request.owner && value.rotationId === request.rotationId;
}

export function holderOf(value: HeldValue): LockInfo {
  return { owner: value.owner, rotationId: value.rotationId, expiresAt: value.expiresAt };
}

/**
 * At most this many rounds; each lost CAS means another runner now holds a fresh lock (one more
 * round than a read-first loop needs, for a value remembered from before that turned out stale).
 */
export const MAX_ROUNDS = 4;

/** How an operator frees a lock (docs/runbook.md, "Clearing a stale lock"); never by deleting it. */
const FREE_IT =
  'to free it, write a released value (aws secretsmanager put-secret-value --secret-string \'{"state":"released","owner":"operator","rotationId":"manual-release","releasedAt":"<ISO time>"}\', see the runbook); never delete it: a deleted name stays reserved for 7-30 days and blocks every later lock';

/** The error for a lock secret scheduled for deletion (someone deleted it), naming the repair. */
export function lockErrorOf(context: LockContext, lockName: string, error: unknown, operation: BackendOperation): unknown {
  if (!(error instanceof BackendError) || error.code !== 'KR_BACKEND_SCHEDULED_FOR_DELETION') return error;
  return new BackendError(
    'KR_BACKEND_SCHEDULED_FOR_DELETION',
    `aws lock secret ${lockName} is scheduled for deletion, so no runner can take the key's lock: restore it (aws secretsmanager restore-secret --secret-id ${lockName}), then write a released value if it is still held; never delete a lock secret`,
    { backend: context.backendName, kind: 'aws', operation, path: lockName, ...(error.status === undefined ? {} : { status: error.status }) },
  );
}

/**
 * After a lock change that failed with an unknown outcome: the lock, when the change landed
 * (AWSCURRENT holds `held`, this request's value); otherwise undefined. A read-back that fails
 * too counts as not landed; the caller's retry with the same owner and rotation then finds its
 * own lock and takes it again.
 */
export async function landedLock(context: LockContext, lockName: string, held: HeldValue, error: unknown, tookOver: boolean): Promise<LockOutcome | undefined> {
  const unknownOutcome = !(error instanceof BackendError) || ['KR_BACKEND_TIMEOUT', 'KR_BACKEND_UNAVAILABLE', 'KR_BACKEND_INVALID_RESPONSE'].includes(error.code);
  if (!unknownOutcome) return undefined;
  try {
    const current = await readCurrentLock(context, lockName, 'lock');
    if (current?.value.state !== 'held' || !isOurs(current.value, held) || current.value.expiresAt !== held.expiresAt) return undefined;
    return { acquired: true, lock: { ...holderOf(held), token: current.versionId, tookOver } };
  } catch {
    return undefined;
  }
}
