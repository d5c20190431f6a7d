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
    throw new BackendError('KR_BACKEND_INVALID_RESPONSE', `aws lock secret ${lockName} holds a value keyroll did not write; delete it to free the lock`, {
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

export async function acquireLock(context: LockContext, path: string, request: LockRequest): Promise<LockOutcome> {
  const lockName = lockSecretName(path);
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const now = context.now();
    const held: LockValue = {
      state: 'held',
      owner: request.owner,
      rotationId: request.rotationId,
      expiresAt: new Date(now.getTime() + request.ttlMs).toISOString(),
    };
    const created = await createLockSecret(context, lockName, held);
    if (created !== undefined) return { acquired: true, lock: { ...holderOf(held), token: created, tookOver: false } };

    const current = await readCurrentLock(context, lockName, 'lock');
    if (current === undefined) continue; // deleted by hand between the two calls: create again
    const { value } = current;
    const free = value.state === 'released' || isOurs(value, request) || Date.parse(value.expiresAt) <= now.getTime();
    if (!free) return { acquired: false, holder: holderOf(value) };

    const version = await compareAndSwap(context, lockName, current.versionId, held, 'lock');
    if (version !== undefined) {
      const tookOver = value.state === 'held' && !isOurs(value, request);
      return { acquired: true, lock: { ...holderOf(held), token: version, tookOver } };
    }
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
      Description: 'keyroll rotation lock; holds no secret. Delete it only when no rotation runs.',
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
  const current = await readCurrentLock(context, lockName, 'unlock');
  if (current?.versionId !== lock.token || current.value.state !== 'held' || !isOurs(current.value, lock)) return;
  const released: LockValue = { state: 'released', owner: lock.owner, rotationId: lock.rotationId, releasedAt: context.now().toISOString() };
  // A lost CAS means our lock expired and another runner took it over: theirs now, left alone.
  await compareAndSwap(context, lockName, current.versionId, released, 'unlock');
}

/** The lock as `status` and recovery see it: the holder (even past expiry), or undefined when free. */
export async function readLockInfo(context: LockContext, path: string): Promise<LockInfo | undefined> {
  const current = await readCurrentLock(context, lockSecretName(path), 'state');
  return current?.value.state === 'held' ? holderOf(current.value) : undefined;
}
