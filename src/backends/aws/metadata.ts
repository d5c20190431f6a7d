// keyroll's bookkeeping on the target secret's tags: the intent marker (invariant 6), the last
// rotation and the last failure (see tags.ts for the encoding), and the state read back from them.
// Tags change no secret version. When the target does not exist yet and the policy lets keyroll
// create it, bookkeeping creates it empty (no value, no version): the intent marker must be
// durable before the first roll of a brand-new destination, and the first write then adds the
// value. Intent changes happen under the key lock, so a read-then-untag needs no CAS.
import type { DescribeSecretCommandOutput } from '@aws-sdk/client-secrets-manager';
import { BackendError } from '../errors.ts';
import type { BackendOperation } from '../errors.ts';
import type { FailureRecord, Intent, KeyState, StoreTarget } from '../types.ts';
import type { SecretsManagerCalls } from './client.ts';
import type { LockContext } from './lock.ts';
import { readLockInfo } from './lock.ts';
import {
  TAG_INTENT,
  TAG_LAST_FAILURE,
  TAG_LAST_ROTATED_AT,
  TAG_LAST_ROTATION_ID,
  TAG_LAST_VERSION,
  creationTags,
  failureTagValue,
  intentTagValue,
  parseFailureTag,
  parseIntentTag,
  tagMap,
} from './tags.ts';
import { isSecretArn } from './target.ts';

export interface MetadataContext {
  calls: SecretsManagerCalls;
  backendName: string;
  createIfMissing: boolean;
  kmsKeyId?: string | undefined;
  tags: Readonly<Record<string, string>>;
}

function isNotFound(error: unknown): boolean {
  return error instanceof BackendError && error.code === 'KR_BACKEND_NOT_FOUND';
}

/** The secret's description, or undefined when it does not exist. */
export async function describeTarget(
  context: Pick<MetadataContext, 'calls'>,
  path: string,
  operation: BackendOperation,
): Promise<DescribeSecretCommandOutput | undefined> {
  try {
    return await context.calls.describeSecret(operation, path);
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}

/** The AWSCURRENT version id, or undefined for a secret without a value yet. */
export function currentVersionOf(description: DescribeSecretCommandOutput): string | undefined {
  const stages = description.VersionIdsToStages ?? {};
  return Object.keys(stages).find((versionId) => stages[versionId]?.includes('AWSCURRENT'));
}

/** Sets tags on the target, creating it empty first when it is missing and may be created. */
async function tagTarget(context: MetadataContext, path: string, operation: BackendOperation, tags: { Key: string; Value: string }[]): Promise<void> {
  try {
    await context.calls.tagResource(operation, path, tags);
    return;
  } catch (error) {
    if (!isNotFound(error) || !context.createIfMissing || isSecretArn(path)) throw error;
  }
  try {
    await context.calls.createSecret(operation, {
      Name: path,
      ...(context.kmsKeyId === undefined ? {} : { KmsKeyId: context.kmsKeyId }),
      Tags: [...creationTags(context.tags), ...tags],
    });
  } catch (error) {
    // Created meanwhile by a write: tag the secret that now exists.
    if (!(error instanceof BackendError && error.code === 'KR_BACKEND_CONFLICT')) throw error;
    await context.calls.tagResource(operation, path, tags);
  }
}

export async function setIntent(context: MetadataContext, target: StoreTarget, intent: Intent): Promise<void> {
  await tagTarget(context, target.path, 'intent', [{ Key: TAG_INTENT, Value: intentTagValue(intent) }]);
}

export async function clearIntent(context: MetadataContext, target: StoreTarget, rotationId: string): Promise<void> {
  const description = await describeTarget(context, target.path, 'intent');
  const marker = tagMap(description?.Tags).get(TAG_INTENT);
  if (marker === undefined || parseIntentTag(marker)?.rotationId !== rotationId) return;
  await context.calls.untagResource('intent', target.path, [TAG_INTENT]);
}

export async function recordRotation(
  context: MetadataContext,
  target: StoreTarget,
  rotation: { rotationId: string; rotatedAt: string; version: string },
): Promise<void> {
  await tagTarget(context, target.path, 'record', [
    { Key: TAG_LAST_ROTATED_AT, Value: rotation.rotatedAt },
    { Key: TAG_LAST_ROTATION_ID, Value: rotation.rotationId },
    { Key: TAG_LAST_VERSION, Value: rotation.version },
  ]);
}

export async function recordFailure(context: MetadataContext, target: StoreTarget, failure: FailureRecord): Promise<void> {
  await tagTarget(context, target.path, 'record', [{ Key: TAG_LAST_FAILURE, Value: failureTagValue(failure) }]);
}

export async function readState(context: MetadataContext, lock: LockContext, target: StoreTarget): Promise<KeyState> {
  const [description, lockInfo] = await Promise.all([describeTarget(context, target.path, 'state'), readLockInfo(lock, target.path)]);
  const tags = tagMap(description?.Tags);
  const state: KeyState = {
    exists: description !== undefined && description.DeletedDate === undefined && currentVersionOf(description) !== undefined,
  };
  const lastRotatedAt = tags.get(TAG_LAST_ROTATED_AT);
  if (lastRotatedAt !== undefined) state.lastRotatedAt = lastRotatedAt;
  const lastRotationId = tags.get(TAG_LAST_ROTATION_ID);
  if (lastRotationId !== undefined) state.lastRotationId = lastRotationId;
  const intent = parseIntentTag(tags.get(TAG_INTENT) ?? '');
  if (intent !== undefined) state.intent = intent;
  const lastFailure = parseFailureTag(tags.get(TAG_LAST_FAILURE) ?? '');
  if (lastFailure !== undefined) state.lastFailure = lastFailure;
  if (lockInfo !== undefined) state.lock = lockInfo;
  return state;
}
