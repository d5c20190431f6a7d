// The value of the AWS key lock, wherever it lives (lock/lock.ts decides: a version of the target
// secret itself, or the companion secret `<name>.keyroll-lock`), the two places' common shape
// (LockPlace: read, the first lock, the compare-and-swap), and what this process last saw of it.
// A lock value is JSON that holds no secret: held by an owner and rotation until an expiry, or
// released. The companion of a target whose lock moved onto the target holds the seal (below).
// Another owner's lock is stale only once its expiry lies `clockSkewMs` in the past by this
// process's clock (invariant 9: the runners' clocks may disagree by that much).
// A held lock can be given back without a request of its own, with its holder's finish record
// (the target's `keyroll:lock-released` tag, record-tags.ts). A tag proves nothing by its name:
// tags are public (the intent marker shows every lock's owner and rotation) and IAM grants
// TagResource apart from writing the secret (cost allocation, tag governance). So each held value
// carries `releaseDigest`, the SHA-256 of a random release key that only the process that took the
// lock knows (HeldLock.token; never logged, never written before the release): the mark frees the
// lock only when it shows that key. Reading the lock value (GetSecretValue) shows the digest, not
// the key, so no principal that cannot move KEYROLL_LOCK (PutSecretValue, UpdateSecretVersionStage)
// can free or take a held lock. A held value without a digest (written by an earlier keyroll) is
// never freed by a mark: it is released by its compare-and-swap or goes stale after its expiry.
// A lock change whose answer is lost (timeout, reset, 5xx) may have landed: `landedLock` reads the
// lock back, and one that carries the request's owner, rotation and expiry is ours.
import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import { BackendError } from '../../errors.ts';
import type { BackendOperation } from '../../errors.ts';
import type { LockInfo, LockOutcome, LockRequest, RecordDoubt } from '../../types.ts';
import type { SecretsManagerCalls } from '../client.ts';
import { parseReleaseMark, type ReleaseMark } from '../record-tags.ts';

export const LockValue = z.discriminatedUnion('state', [
  z.object({
    state: z.literal('held'),
    owner: z.string(),
    rotationId: z.string(),
    expiresAt: z.iso.datetime(),
    releaseDigest: z.string().optional(),
  }),
  z.object({
    state: z.literal('released'),
    owner: z.string(),
    rotationId: z.string(),
    releasedAt: z.iso.datetime(),
  }),
]);
export type LockValue = z.infer<typeof LockValue>;
export type HeldValue = Extract<LockValue, { state: 'held' }>;

/**
 * The companion's value once the lock moved onto the target (lock/companion.ts): held for ever by
 * nobody. A keyroll of an earlier version reads it as a lock another runner holds and leaves the
 * key alone (busy), so it can never roll a key whose lock it no longer sees; `status` there shows
 * this owner. This version reads it as "the lock is on the target".
 */
export const SEALED: HeldValue = {
  state: 'held',
  owner: 'keyroll: this lock moved onto the secret itself (staging label KEYROLL_LOCK)',
  rotationId: 'lock-moved-to-secret',
  expiresAt: '9999-12-31T23:59:59.999Z',
};

export function isSealed(value: LockValue): boolean {
  return value.state === 'held' && value.rotationId === SEALED.rotationId && value.owner === SEALED.owner;
}

/** A lock value as stored, or undefined when the text is not one (never echoed: it may be anything). */
export function parseLockValue(text: string | undefined): LockValue | undefined {
  if (text === undefined) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    return undefined;
  }
  const parsed = LockValue.safeParse(json);
  return parsed.success ? parsed.data : undefined;
}

export interface LockContext {
  calls: SecretsManagerCalls;
  backendName: string;
  kmsKeyId?: string | undefined;
  tags: Readonly<Record<string, string>>;
  now: () => Date;
  /** The last lock value this process saw or wrote, per place (absent: none seen). */
  sightings?: LockSightings;
}

export interface CurrentLock {
  versionId: string;
  value: LockValue;
}

/** A lock change either landed (its version is the lock now) or lost, with the lock as read after it. */
export type SwapOutcome = { won: true; versionId: string } | { won: false; now: CurrentLock | undefined };

export type PlaceKind = 'target' | 'companion';

/**
 * Where a key lock lives, behind the same three operations: the target's own version labelled
 * KEYROLL_LOCK (lock/target.ts) or the companion's AWSCURRENT (lock/companion.ts).
 */
export interface LockPlace {
  readonly kind: PlaceKind;
  /** The secret that holds the lock value. */
  readonly secretId: string;
  /** The target secret's name: the key of the release mark that gives a lock back (record-tags.ts). */
  readonly targetName: string;
  /** The lock as it is now; undefined when there is none yet. */
  read(operation: BackendOperation): Promise<CurrentLock | undefined>;
  /** The first lock: of several callers at once exactly one wins; the others read what won. */
  create(value: LockValue, operation: BackendOperation): Promise<SwapOutcome>;
  /** Replaces the lock value of version `expected` with `value`, atomically. */
  swap(expected: string, value: LockValue, operation: BackendOperation): Promise<SwapOutcome>;
  /** The error to raise for `error` met at this place (names the repair an operator needs). */
  errorOf(error: unknown, operation: BackendOperation): unknown;
}

/** A fresh release key for a lock about to be taken (128 random bits, in the tag alphabet). */
export function newReleaseKey(): string {
  return randomBytes(16).toString('base64url');
}

/** What a held lock value carries of its release key: the key itself stays in this process. */
export function releaseDigestOf(releaseKey: string): string {
  return createHash('sha256').update(releaseKey, 'utf8').digest('base64url');
}

/**
 * HeldLock.token: the place and the version of the lock value this process wrote, and the release
 * key whose digest that value carries (the finish record shows it to give the lock back). The token
 * stays in this process: it is never logged or written anywhere.
 */
export function lockToken(kind: PlaceKind, versionId: string, releaseKey: string | undefined): string {
  return releaseKey === undefined ? `${kind}:${versionId}` : `${kind}:${versionId}:${releaseKey}`;
}

export function parseLockToken(token: string): { kind: PlaceKind; versionId: string; releaseKey?: string } {
  // Version ids are AWS UUIDs or keyroll's tokens, release keys base64url: neither holds a colon.
  const [kind, versionId = '', releaseKey] = token.split(':');
  return {
    kind: kind === 'target' ? 'target' : 'companion',
    versionId,
    ...(releaseKey === undefined || releaseKey === '' ? {} : { releaseKey }),
  };
}

/**
 * The lock value this process last saw or wrote, per place, or 'missing' when its read found no
 * lock there. A first guess only: every use goes through the place's create or compare-and-swap,
 * which refuse a guess that is out of date.
 */
export class LockSightings {
  readonly #byPlace = new Map<string, CurrentLock | 'missing'>();
  /** The target's `keyroll:lock-released` value last seen (or written), per target name. */
  readonly #released = new Map<string, string>();

  get(place: LockPlace): CurrentLock | 'missing' | undefined {
    return this.#byPlace.get(placeKey(place));
  }

  set(place: LockPlace, sighting: CurrentLock | 'missing'): void {
    this.#byPlace.set(placeKey(place), sighting);
  }

  /** Notes the release mark read from (or written to) the target's tags; undefined: none there. */
  sawReleaseMark(targetName: string, mark: string | undefined): void {
    if (mark === undefined || mark === '') this.#released.delete(targetName);
    else this.#released.set(targetName, mark);
  }

  /** True when `value` is a held lock its holder gave back with the finish step's record (record-tags.ts). */
  isReleased(targetName: string, value: LockValue): boolean {
    return releaseProves(this.releaseMark(targetName), value);
  }

  /** The release mark last seen on the target, as written. */
  releaseMark(targetName: string): ReleaseMark | undefined {
    return parseReleaseMark(this.#released.get(targetName));
  }
}

/**
 * Whether `mark` gives back the held lock `value`: it names the lock's owner and rotation and shows
 * the release key whose digest the lock carries. A value without a digest is never given back by a mark.
 */
export function releaseProves(mark: ReleaseMark | undefined, value: LockValue): boolean {
  if (mark?.releaseKey === undefined || value.state !== 'held' || value.releaseDigest === undefined)
    return false;
  return isOurs(value, mark) && releaseDigestOf(mark.releaseKey) === value.releaseDigest;
}

/**
 * Whether `mark` is a forgery: it names the lock `value` holds, or the rotation whose intent marker
 * is still set, without proving that lock given back (releaseProves). keyroll writes a mark only with
 * its lock's release key, in the TagResource that also clears its marker; a mark of an earlier keyroll
 * (no key) names a lock without a digest, and its marker is cleared, so it is not counted.
 */
export function forgedReleaseMark(
  mark: ReleaseMark | undefined,
  value: LockValue | undefined,
  intent: { owner: string; rotationId: string } | undefined,
): boolean {
  if (mark === undefined || (value !== undefined && releaseProves(mark, value))) return false;
  // A mark and a lock both of an earlier keyroll (no key, no digest) are not counted: that keyroll
  // wrote such marks itself. This one frees no such lock by a mark: it waits for the lock's expiry.
  const namesHeld =
    value?.state === 'held' &&
    (value.releaseDigest !== undefined || mark.releaseKey !== undefined) &&
    isOurs(value, mark);
  return namesHeld || (intent !== undefined && isOurs(intent, mark));
}

function placeKey(place: LockPlace): string {
  return `${place.kind} ${place.secretId}`;
}

export function isOurs(
  value: { owner: string; rotationId: string },
  request: { owner: string; rotationId: string },
): boolean {
  return value.owner === request.owner && value.rotationId === request.rotationId;
}

export function holderOf(value: HeldValue): LockInfo {
  return { owner: value.owner, rotationId: value.rotationId, expiresAt: value.expiresAt };
}

export function releasedByRecord(context: LockContext, place: LockPlace, value: LockValue): boolean {
  return context.sightings?.isReleased(place.targetName, value) === true;
}

/** The answer "busy" for a lock `holder` keeps: with a doubt when the target's release mark forges its release. */
export function busyOutcome(
  context: LockContext,
  place: LockPlace,
  holder: HeldValue,
): { acquired: false; holder: LockInfo; doubts?: RecordDoubt[] } {
  const forged = forgedReleaseMark(context.sightings?.releaseMark(place.targetName), holder, undefined);
  return { acquired: false, holder: holderOf(holder), ...(forged ? { doubts: [FORGED_RELEASE_MARK] } : {}) };
}

/** The doubt a forged release mark raises (audited as key.record.distrusted). */
export const FORGED_RELEASE_MARK: RecordDoubt = {
  record: 'lock',
  field: 'releaseMark',
  problem: 'forged',
  action: 'ignored',
};

/**
 * `value` when it keeps `request` out at `now`: held by another owner or rotation, not given back
 * with a record, not stale, i.e. `now` is not yet past its expiry plus the runners' allowed
 * clock skew, and its owner not proven dead; else undefined.
 */
export function blockingHolder(
  value: LockValue,
  request: LockRequest,
  now: Date,
  released: boolean,
): HeldValue | undefined {
  if (value.state !== 'held' || isOurs(value, request) || released) return undefined;
  // A holder proven dead (LockRequest.deadOwners) is taken over as a stale one is.
  if (request.deadOwners?.includes(value.owner) === true) return undefined;
  return now.getTime() > Date.parse(value.expiresAt) + (request.clockSkewMs ?? 0) ? undefined : value;
}

/**
 * At most this many rounds; each lost CAS means another runner now holds a fresh lock (one more
 * round than a read-first loop needs, for a value remembered from before that turned out stale).
 */
export const MAX_ROUNDS = 4;

/** Whether a failed call may have landed at AWS all the same (its answer was lost on the way). */
export function outcomeUnknown(error: unknown): boolean {
  return (
    !(error instanceof BackendError) ||
    ['KR_BACKEND_TIMEOUT', 'KR_BACKEND_UNAVAILABLE', 'KR_BACKEND_INVALID_RESPONSE'].includes(error.code)
  );
}

/**
 * After a lock change that failed with an unknown outcome: the lock, when the change landed (the
 * place holds `held`, this request's value); otherwise undefined. A read-back that fails too
 * counts as not landed; the caller's retry with the same owner and rotation then finds its own
 * lock and takes it again.
 */
export async function landedLock(
  place: LockPlace,
  held: HeldValue,
  releaseKey: string | undefined,
  error: unknown,
  tookOver: boolean,
): Promise<LockOutcome | undefined> {
  if (!outcomeUnknown(error)) return undefined;
  try {
    const current = await place.read('lock');
    if (
      current?.value.state !== 'held' ||
      !isOurs(current.value, held) ||
      current.value.expiresAt !== held.expiresAt ||
      current.value.releaseDigest !== held.releaseDigest
    )
      return undefined;
    return {
      acquired: true,
      lock: { ...holderOf(held), token: lockToken(place.kind, current.versionId, releaseKey), tookOver },
    };
  } catch {
    return undefined;
  }
}

/** A lock value keyroll did not write, at `secretId`; `repair` says how to put it right. */
export function foreignValue(
  context: LockContext,
  secretId: string,
  operation: BackendOperation,
  repair: string,
): BackendError {
  return new BackendError(
    'KR_BACKEND_INVALID_RESPONSE',
    `aws key lock at ${secretId} holds a value keyroll did not write; ${repair}`,
    {
      backend: context.backendName,
      kind: 'aws',
      operation,
      path: secretId,
    },
  );
}

/**
 * The lock at `place`: the version carrying `stage` (always named: moto's unlabelled default does
 * not follow AWSCURRENT), noted in the sightings; undefined when none does (or no secret at all).
 * A value keyroll did not write is an error whose message says how to `repair` it.
 */
export async function readLockVersion(
  context: LockContext,
  place: LockPlace,
  stage: string,
  operation: BackendOperation,
  repair: string,
): Promise<CurrentLock | undefined> {
  let answer;
  try {
    answer = await context.calls.getSecretValue(operation, { SecretId: place.secretId, VersionStage: stage });
  } catch (error) {
    if (error instanceof BackendError && error.code === 'KR_BACKEND_NOT_FOUND') {
      context.sightings?.set(place, 'missing');
      return undefined;
    }
    throw error;
  }
  const value = parseLockValue(answer.SecretString);
  if (answer.VersionId === undefined || value === undefined)
    throw foreignValue(context, place.secretId, operation, repair);
  const current = { versionId: answer.VersionId, value };
  context.sightings?.set(place, current);
  return current;
}
