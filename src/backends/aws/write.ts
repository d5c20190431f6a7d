// The write of a new secret (invariants 2 and 8) and its read-back.
// The first attempt of a rotation is exactly one PutSecretValue (plus CreateSecret when the
// secret is missing and the policy allows creating it): no read, no tag, nothing before it.
// Its ClientRequestToken is derived from the rotation id, so AWS itself makes a retried put
// idempotent: same token and value, no second version. AWS does not say whether a put was new
// or ignored, so `alreadyApplied` comes from a read that only a retry pays for: when this
// process already attempted (rotation, path), it first looks for the version named by the token.
// A target that preflight (or any description) last saw missing is created with the value at once,
// rather than after a PutSecretValue that would answer ResourceNotFound: still one call before the
// value is durable, and a put follows when it exists after all.
// This is the unfenced write (fallbacks, direct callers): its put makes the version AWSCURRENT at
// once. The fenced write of a destination under its lock (write-fenced.ts) sends the same
// first request with a staging label of its own instead, and moves AWSCURRENT after it.
import { createHash } from 'node:crypto';
import { BackendError } from '../errors.ts';
import { parseStoredValue, renderText } from '../render.ts';
import type { SecretRecord, StoreTarget, StoredSecret, WriteResult } from '../types.ts';
import type { AttemptLog } from '../attempts.ts';
import type { SecretsManagerCalls } from './client.ts';
import type { TargetHints } from './known.ts';
import { isSecretArn, mayCreateSecret } from './target.ts';
import { creationTags } from './record-tags.ts';

export interface WriteContext {
  calls: SecretsManagerCalls;
  backendName: string;
  createIfMissing: boolean;
  kmsKeyId?: string | undefined;
  tags: Readonly<Record<string, string>>;
  attempts: AttemptLog;
  /** What targets looked like when last described (create or put first). */
  targets: TargetHints;
}

/**
 * The ClientRequestToken (and so the VersionId) for a rotation: the rotation id itself when it
 * fits AWS's 32–64 characters (keyroll's rotation ids are UUIDs), else derived from it
 * deterministically, so every retry of the same rotation sends the same token.
 */
export function clientRequestToken(rotationId: string): string {
  if (rotationId.length >= 32 && rotationId.length <= 64) return rotationId;
  const digest = createHash('sha256').update(rotationId, 'utf8').digest('hex');
  if (rotationId.length > 64) return digest;
  return `${rotationId}-${digest}`.slice(0, 64);
}

export async function writeSecret(
  context: WriteContext,
  target: StoreTarget,
  record: SecretRecord,
): Promise<WriteResult> {
  const value = renderText(target.shape, record);
  const token = clientRequestToken(record.rotationId);
  if (context.attempts.record(target.path, token)) {
    const earlier = await readVersion(context, target.path, token);
    if (earlier !== undefined) {
      if (earlier.value === value) return { version: token, alreadyApplied: true };
      throw tokenInUse(context, target.path, token);
    }
  }
  const written = await putOrCreate(context, target.path, value, token);
  context.targets.wroteValue(target.path);
  return { version: written.version, alreadyApplied: false };
}

/** What one put or create did: the version it wrote, and whether that version is AWSCURRENT now. */
export interface Landed {
  version: string;
  current: boolean;
}

/**
 * The one request that makes the value durable: PutSecretValue, or CreateSecret when the target
 * is (likely) missing and may be created. Without `stages` the version becomes AWSCURRENT; with
 * them it carries only those labels, unless it is the secret's first version (AWS then attaches
 * AWSCURRENT itself) or an earlier attempt already made it current.
 */
export async function putOrCreate(
  context: WriteContext,
  path: string,
  value: string,
  token: string,
  stages?: string[],
): Promise<Landed> {
  if (mayCreateSecret(context.createIfMissing, path) && context.targets.likelyMissing(path))
    return createWithValue(context, path, value, token, stages);
  try {
    return await putValue(context, path, value, token, stages);
  } catch (error) {
    if (!(error instanceof BackendError) || error.code !== 'KR_BACKEND_NOT_FOUND') throw error;
    return await createWithValue(context, path, value, token, stages);
  }
}

async function putValue(
  context: WriteContext,
  path: string,
  value: string,
  token: string,
  stages: string[] | undefined,
): Promise<Landed> {
  try {
    const answer = await context.calls.putSecretValue('write', {
      SecretId: path,
      SecretString: value,
      ClientRequestToken: token,
      ...(stages === undefined ? {} : { VersionStages: stages }),
    });
    return {
      version: answer.VersionId ?? token,
      current: stages === undefined || answer.VersionStages?.includes('AWSCURRENT') === true,
    };
  } catch (error) {
    // PutSecretValue answers ResourceExistsException only for a token already used with another value.
    if (error instanceof BackendError && error.code === 'KR_BACKEND_CONFLICT')
      throw tokenInUse(context, path, token);
    throw error;
  }
}

async function createWithValue(
  context: WriteContext,
  path: string,
  value: string,
  token: string,
  stages: string[] | undefined,
): Promise<Landed> {
  if (!mayCreateSecret(context.createIfMissing, path)) {
    const why = isSecretArn(path)
      ? 'a secret cannot be created from an ARN'
      : 'createIfMissing is off for this backend';
    throw new BackendError('KR_BACKEND_NOT_FOUND', `aws secret ${path} does not exist and ${why}`, {
      backend: context.backendName,
      kind: 'aws',
      operation: 'write',
      path,
    });
  }
  try {
    const answer = await context.calls.createSecret('write', {
      Name: path,
      SecretString: value,
      ClientRequestToken: token,
      ...(context.kmsKeyId === undefined ? {} : { KmsKeyId: context.kmsKeyId }),
      Tags: creationTags(context.tags),
    });
    // A new secret's only version is AWSCURRENT: CreateSecret is atomic (it fails when the name exists).
    return { version: answer.VersionId ?? token, current: true };
  } catch (error) {
    // Created meanwhile (another writer, or an intent marker on the empty secret): put into it.
    if (error instanceof BackendError && error.code === 'KR_BACKEND_CONFLICT')
      return putValue(context, path, value, token, stages);
    throw error;
  }
}

/** Version `versionId`: its value and whether it is AWSCURRENT; undefined when there is no such version (or secret). */
export async function readVersion(
  context: WriteContext,
  path: string,
  versionId: string,
): Promise<{ value: string | undefined; current: boolean } | undefined> {
  try {
    const answer = await context.calls.getSecretValue('write', { SecretId: path, VersionId: versionId });
    return { value: answer.SecretString, current: answer.VersionStages?.includes('AWSCURRENT') === true };
  } catch (error) {
    if (error instanceof BackendError && error.code === 'KR_BACKEND_NOT_FOUND') return undefined;
    throw error;
  }
}

export function tokenInUse(context: WriteContext, path: string, token: string): BackendError {
  return new BackendError(
    'KR_BACKEND_CONFLICT',
    `aws secret ${path} already has version ${token} with a different value (the same rotation wrote twice with different secrets)`,
    { backend: context.backendName, kind: 'aws', operation: 'write', path },
  );
}

/** The AWSCURRENT value, or undefined when the secret, its current version or the secret field is missing. */
export async function readSecret(
  context: Pick<WriteContext, 'calls'>,
  target: StoreTarget,
): Promise<StoredSecret | undefined> {
  return readStage(context, target, 'AWSCURRENT');
}

/**
 * The value the latest write replaced: AWSPREVIOUS, which AWS moves to the version AWSCURRENT left
 * on every change of AWSCURRENT, the unfenced put's and the fenced write's move alike (write-fenced.ts).
 * A fenced write refused before its move changed neither label. Undefined when the secret has had
 * only one value (or none).
 */
export async function readPrevious(
  context: Pick<WriteContext, 'calls'>,
  target: StoreTarget,
): Promise<StoredSecret | undefined> {
  return readStage(context, target, 'AWSPREVIOUS');
}

function readStage(
  context: Pick<WriteContext, 'calls'>,
  target: StoreTarget,
  stage: 'AWSCURRENT' | 'AWSPREVIOUS',
): Promise<StoredSecret | undefined> {
  return readStoredVersion(context, target, { VersionStage: stage });
}

/**
 * The value a stage or a version id names, parsed with the destination's shape; undefined when
 * there is none (no such version, a version without a value yet, or a value of another shape).
 */
export async function readStoredVersion(
  context: Pick<WriteContext, 'calls'>,
  target: StoreTarget,
  which: { VersionStage: string } | { VersionId: string },
): Promise<StoredSecret | undefined> {
  let answer;
  try {
    answer = await context.calls.getSecretValue('read', { SecretId: target.path, ...which });
  } catch (error) {
    if (error instanceof BackendError && error.code === 'KR_BACKEND_NOT_FOUND') return undefined;
    throw error;
  }
  if (answer.SecretString === undefined) return undefined;
  const parsed = parseStoredValue(target.shape, answer.SecretString);
  if (parsed === undefined) return undefined;
  return {
    secret: parsed.secret,
    ...(answer.VersionId === undefined ? {} : { version: answer.VersionId }),
    ...(parsed.rotationId === undefined ? {} : { rotationId: parsed.rotationId }),
    ...(parsed.keyId === undefined ? {} : { keyId: parsed.keyId }),
  };
}
