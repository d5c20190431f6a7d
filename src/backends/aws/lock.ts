// The key lock (invariant 5) for an AWS destination: a companion secret `<name>.keyroll-lock`
// whose AWSCURRENT value says who holds the lock until when. Every change is atomic:
// - the first lock ever is CreateSecret, which fails with ResourceExistsException for all but one caller;
// - every later change (take a free or stale lock, refresh our own, release) is a compare-and-swap:
//   put the new value as a version labelled KEYROLL_CANDIDATE (not current), then
//   UpdateSecretVersionStage moves AWSCURRENT to it only if AWSCURRENT is still on the version we
//   read; AWS refuses the move otherwise, so of two runners taking the same stale lock exactly one wins.
// Releasing writes a `released` value rather than deleting the secret: a deleted secret name stays
// reserved for its recovery window (and deletion is asynchronous even when forced), which would block
// the next CreateSecret. The companion secret therefore stays, one per destination (it is billed as
// a secret), and gains two versions per rotation; AWS prunes unlabelled versions itself.
// A lock change whose answer is lost (timeout, reset, 5xx) may have landed: the lock is read back,
// and one that carries this request's owner, rotation and expiry is ours and returned as acquired,
// so a caller never holds a lock it does not know about (and never leaves one behind for a TTL).
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { BackendError } from '../errors.ts';
import type { BackendOperation } from '../errors.ts';
import type { HeldLock, LockInfo, LockOutcome, LockRequest } from '../types.ts';
import type { SecretsManagerCalls } from './client.ts';
import { creationTags } from './tags.ts';
import { secretNameOf } from './target.ts';

export const LOCK_SUFFIX = '.keyroll-lock';
/** The label that keeps a lock candidate version out of AWSCURRENT until the CAS moves it. */
export const CANDIDATE_STAGE = 'KEYROLL_CANDIDATE';

const LockValue = z.discriminatedUnion('state', [
  z.object({ state: z.literal('held'), owner: z.string(), rotationId: z.string(), expiresAt: z.iso.datetime() }),
  z.object({ state: z.literal('released'), owner: z.string(), rotationId: z.string(), releasedAt: z.iso.datetime() }),
]);
type LockValue = z.infer<typeof LockValue>;

export interface LockContext {
  calls: SecretsManagerCalls;
  backendName: string;
  kmsKeyId?: string | undefined;
  tags: Readonly<Record<string, string>>;
  now: () => Date;
}

interface CurrentLock {
  versionId: string;
  value: LockValue;
}

/**
 * The name of the lock companion of a secret given by name or full ARN. It lives in the
 * client's account and region, beside a secret of the same account.
 */
export function lockSecretName(path: string): string {
  return `${secretNameOf(path)}${LOCK_SUFFIX}`;
}

/** The lock's current value, or undefined when no lock secret exists yet. */
async function readCurrentLock(context: LockContext, lockName: string, operation: BackendOperation): Promise<CurrentLock | undefined> {
  let answer;
  try {
    // Always by stage: the unlabelled default of GetSecretValue is AWSCURRENT in AWS, but moto
    // does not follow AWSCURRENT when UpdateSecretVersionStage moves it.
    answer = await context.calls.getSecretValue(operation, { SecretId: lockName, VersionStage: 'AWSCURRENT' });
  } catch (error) {
    if (error instanceof BackendError && error.code === 'KR_BACKEND_NOT_FOUND') return undefined;
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
  return { versionId: answer.VersionId, value: parsed.data };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/**
 * Replaces the lock value `expectedVersionId` with `value`, atomically. Returns the new
 * version id, or undefined when another runner changed the lock first.
 */
async function compareAndSwap(
  context: LockContext,
  lockName: string,
  expectedVersionId: string,
  value: LockValue,
  operation: BackendOperation,
): Promise<string | undefined> {
  const candidate = randomUUID();
  await context.calls.putSecretValue(operation, {
    SecretId: lockName,
    SecretString: JSON.stringify(value),
    ClientRequestToken: candidate,
    VersionStages: [CANDIDATE_STAGE],
  });
  const moved = await context.calls.moveCurrentStage(operation, lockName, expectedVersionId, candidate);
  if (moved === 'moved') return candidate;
  // A refused move may also be the SDK's retry of a move whose first answer was lost: the label
  // then already sits on our candidate. Only a re-read tells the two apart.
  const now = await readCurrentLock(context, lockName, operation);
  return now?.versionId === candidate ? candidate : undefined;
}

function isOurs(value: LockValue, request: { owner: string; rotationId: string }): boolean {
  return value.owner === request.owner && value.rotationId === request.rotationId;
}

function holderOf(value: Extract<LockValue, { state: 'held' }>): LockInfo {
  return { owner: value.owner, rotationId: value.rotationId, expiresAt: value.expiresAt };
}

/** At most this many create/read/CAS rounds; each lost CAS means another runner now holds a fresh lock. */
const MAX_ROUNDS = 3;

/** How an operator frees a lock (docs/runbook.md, "Clearing a stale lock"); never by deleting it. */
const FREE_IT =
  'to free it, write a released value (aws secretsmanager put-secret-value --secret-string \'{"state":"released","owner":"operator","rotationId":"manual-release","releasedAt":"<ISO time>"}\', see the runbook); never delete it: a deleted name stays reserved for 7-30 days and blocks every later lock';

/** The error for a lock secret scheduled for deletion (someone deleted it), naming the repair. */
function lockErrorOf(context: LockContext, lockName: string, error: unknown, operation: BackendOperation): unknown {
  if (!(error instanceof BackendError) || error.code !== 'KR_BACKEND_SCHEDULED_FOR_DELETION') return error;
  return new BackendError(
    'KR_BACKEND_SCHEDULED_FOR_DELETION',
    `aws lock secret ${lockName} is scheduled for deletion, so no runner can take the key's lock: restore it (aws secretsmanager restore-secret --secret-id ${lockName}), then write a released value if it is still held; never delete a lock secret`,
    { backend: context.backendName, kind: 'aws', operation, path: lockName, ...(error.status === undefined ? {} : { status: error.status }) },
  );
}

export async function acquireLock(context: LockContext, path: string, request: LockRequest): Promise<LockOutcome> {
  const lockName = lockSecretName(path);
  try {
    return await takeLock(context, lockName, request);
  } catch (error) {
    throw lockErrorOf(context, lockName, error, 'lock');
  }
}

/**
 * After a lock change that failed with an unknown outcome: the lock, when the change landed
 * (AWSCURRENT holds `held`, this request's value); otherwise undefined. A read-back that fails
 * too counts as not landed; the caller's retry with the same owner and rotation then finds its
 * own lock and takes it again.
 */
async function landedLock(context: LockContext, lockName: string, held: Extract<LockValue, { state: 'held' }>, error: unknown, tookOver: boolean): Promise<LockOutcome | undefined> {
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

async function takeLock(context: LockContext, lockName: string, request: LockRequest): Promise<LockOutcome> {
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const now = context.now();
    const held: LockValue = {
      state: 'held',
      owner: request.owner,
      rotationId: request.rotationId,
      expiresAt: new Date(now.getTime() + request.ttlMs).toISOString(),
    };
    let created: string | undefined;
    try {
      created = await createLockSecret(context, lockName, held);
    } catch (error) {
      const ours = await landedLock(context, lockName, held, error, false);
      if (ours) return ours;
      throw error;
    }
    if (created !== undefined) return { acquired: true, lock: { ...holderOf(held), token: created, tookOver: false } };

    const current = await readCurrentLock(context, lockName, 'lock');
    if (current === undefined) continue; // deleted by hand between the two calls: create again
    const { value } = current;
    const free = value.state === 'released' || isOurs(value, request) || Date.parse(value.expiresAt) <= now.getTime();
    if (!free) return { acquired: false, holder: holderOf(value) };

    const tookOver = value.state === 'held' && !isOurs(value, request);
    let version: string | undefined;
    try {
      version = await compareAndSwap(context, lockName, current.versionId, held, 'lock');
    } catch (error) {
      const ours = await landedLock(context, lockName, held, error, tookOver);
      if (ours) return ours;
      throw error;
    }
    if (version !== undefined) return { acquired: true, lock: { ...holderOf(held), token: version, tookOver } };
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
    return answer.VersionId ?? invalidAnswer(context, lockName, 'CreateSecret');
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
  const current = await readCurrentLock(context, lockName, 'unlock');
  if (current?.versionId !== lock.token || current.value.state !== 'held' || !isOurs(current.value, lock)) return;
  const released: LockValue = { state: 'released', owner: lock.owner, rotationId: lock.rotationId, releasedAt: context.now().toISOString() };
  // A lost CAS means our lock expired and another runner took it over: theirs now, left alone.
  await compareAndSwap(context, lockName, current.versionId, released, 'unlock');
}

/** The lock as `status` and recovery see it: the holder (even past expiry), or undefined when free. */
export async function readLockInfo(context: LockContext, path: string): Promise<LockInfo | undefined> {
  const lockName = lockSecretName(path);
  let current: CurrentLock | undefined;
  try {
    current = await readCurrentLock(context, lockName, 'state');
  } catch (error) {
    throw lockErrorOf(context, lockName, error, 'state');
  }
  return current?.value.state === 'held' ? holderOf(current.value) : undefined;
}
