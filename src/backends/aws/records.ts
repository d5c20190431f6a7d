// keyroll's bookkeeping on the target secret's tags: the intent marker (invariant 6), the last
// rotation with the key it stored (the active slot, invariant 10), the last drift probe and the
// last failure (see record-tags.ts for the encoding), and the state read back from them.
// Tags change no secret version. When the target does not exist yet and the policy lets keyroll
// create it, bookkeeping creates it empty (no value, no version): the intent marker must be
// durable before the first roll of a brand-new destination, and the first write then adds the
// value. Intent changes happen under the key lock, so a read-then-untag needs no CAS.
// What this process wrote or read under the lock it still holds is not read again (known.ts):
// the finish step then records the rotation and clears its own marker in one TagResource, the
// marker overwritten with an empty value (TagResource cannot remove a tag; an empty value parses
// as "no intent", and AWS allows tag values of length 0).
import type { DescribeSecretCommandOutput } from '@aws-sdk/client-secrets-manager';
import { BackendError } from '../errors.ts';
import type { BackendOperation } from '../errors.ts';
import type {
  FailureRecord,
  HeldLock,
  Intent,
  KeyState,
  ProbeRecord,
  RotationRecord,
  StoreTarget,
} from '../types.ts';
import type { SecretsManagerCalls } from './client.ts';
import type { HeldFacts, TargetHints, TargetSeen } from './known.ts';
import { heldValueOf, readLockInfo, type LockView } from './lock/lock.ts';
import { lockVersionOf } from './lock/target.ts';
import { forgedReleaseMark, parseLockToken, type LockContext, type LockSightings } from './lock/value.ts';
import {
  INTENT_CLEARED,
  TAG_FAILURE_STREAK,
  TAG_INTENT,
  TAG_LOCK_RELEASED,
  TAG_LAST_FAILURE,
  TAG_LAST_KEY_ID,
  TAG_LAST_PROBE,
  TAG_LAST_ROTATED_AT,
  TAG_LAST_ROTATION_ID,
  TAG_LAST_VERSION,
  creationTags,
  failureTagValue,
  intentTagValue,
  keyIdTagValue,
  lockReleasedTagValue,
  parseFailureTag,
  parseReleaseMark,
  parseIntentTag,
  parseKeyIdTag,
  parseProbeTag,
  probeTagValue,
  streakTagValue,
  tagMap,
} from './record-tags.ts';
import { mayCreateSecret, secretNameOf } from './target.ts';

export interface RecordsContext {
  calls: SecretsManagerCalls;
  backendName: string;
  createIfMissing: boolean;
  kmsKeyId?: string | undefined;
  tags: Readonly<Record<string, string>>;
  /** What targets looked like when last described (which call to try first, where the lock lives). */
  targets: TargetHints;
  /** The lock this process holds per target and the intent marker known under it. */
  held: HeldFacts;
  /** Lock values and release marks this process saw (the finish record gives a lock back, lock.ts). */
  sightings: LockSightings;
}

type TagList = { Key: string; Value: string }[];

function isNotFound(error: unknown): boolean {
  return error instanceof BackendError && error.code === 'KR_BACKEND_NOT_FOUND';
}

/**
 * The secret's description, or undefined when it does not exist. Every description notes what it
 * saw for the lock (where it lives: known.ts) and which lock a finish record gave back (lock/lock.ts).
 */
export async function describeTarget(
  context: Pick<RecordsContext, 'calls'> & { sightings?: LockSightings; targets?: TargetHints },
  path: string,
  operation: BackendOperation,
): Promise<DescribeSecretCommandOutput | undefined> {
  let description: DescribeSecretCommandOutput;
  try {
    description = await context.calls.describeSecret(operation, path);
  } catch (error) {
    if (!isNotFound(error)) throw error;
    context.targets?.described(path, seenOf(undefined));
    return undefined;
  }
  context.targets?.described(path, seenOf(description));
  context.sightings?.sawReleaseMark(secretNameOf(path), tagMap(description.Tags).get(TAG_LOCK_RELEASED));
  return description;
}

/** What a description says for the lock: does the target exist, have a value, carry its own lock. */
export function seenOf(description: DescribeSecretCommandOutput | undefined): TargetSeen {
  return {
    exists: description !== undefined,
    hasValue: description !== undefined && currentVersionOf(description) !== undefined,
    lockOnTarget: lockVersionOf(description?.VersionIdsToStages) !== undefined,
  };
}

/** The AWSCURRENT version id, or undefined for a secret without a value yet. */
export function currentVersionOf(description: DescribeSecretCommandOutput): string | undefined {
  const stages = description.VersionIdsToStages ?? {};
  return Object.keys(stages).find((versionId) => stages[versionId]?.includes('AWSCURRENT'));
}

/**
 * Sets tags on the target, creating it empty first when it is missing and may be created. A
 * target last seen missing is created (with the tags) at once instead of after a TagResource that
 * would answer ResourceNotFound; when it exists after all, it is tagged.
 */
async function tagTarget(
  context: RecordsContext,
  path: string,
  operation: BackendOperation,
  tags: TagList,
): Promise<void> {
  const mayCreate = mayCreateSecret(context.createIfMissing, path);
  if (!mayCreate || !context.targets.likelyMissing(path)) {
    try {
      await context.calls.tagResource(operation, path, tags);
      context.targets.madeExist(path);
      return;
    } catch (error) {
      if (!isNotFound(error) || !mayCreate) throw error;
    }
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
  context.targets.madeExist(path);
}

export async function setIntent(context: RecordsContext, target: StoreTarget, intent: Intent): Promise<void> {
  const settle = context.held.changeIntent(target.path);
  await tagTarget(context, target.path, 'intent', [{ Key: TAG_INTENT, Value: intentTagValue(intent) }]);
  settle(intent.rotationId);
}

/**
 * Whether the marker on the target names `rotationId`: known without a request under a lock this
 * process holds with time left (no other runner can have changed the marker since this process
 * wrote or read it), else read (DescribeSecret).
 */
async function markerNames(context: RecordsContext, path: string, rotationId: string): Promise<boolean> {
  if (context.held.intent(path) === rotationId) return true;
  const description = await describeTarget(context, path, 'intent');
  const marker = tagMap(description?.Tags).get(TAG_INTENT);
  return marker !== undefined && parseIntentTag(marker)?.rotationId === rotationId;
}

export async function clearIntent(
  context: RecordsContext,
  target: StoreTarget,
  rotationId: string,
): Promise<void> {
  if (!(await markerNames(context, target.path, rotationId))) return;
  const settle = context.held.changeIntent(target.path);
  // Overwritten with the empty value, as the finish step does (record-tags.ts): no UntagResource.
  await context.calls.tagResource('intent', target.path, [{ Key: TAG_INTENT, Value: INTENT_CLEARED }]);
  settle(null);
}

/**
 * The tag that gives `lock` back with the record (lock/lock.ts), when the caller is done with it;
 * noted as written once the record landed. Undefined when the lock is not given back this way.
 */
function releaseTag(lock: HeldLock | undefined): { Key: string; Value: string } | undefined {
  const releaseKey = lock === undefined ? undefined : parseLockToken(lock.token).releaseKey;
  const value =
    lock === undefined || releaseKey === undefined
      ? undefined
      : lockReleasedTagValue({ owner: lock.owner, rotationId: lock.rotationId, releaseKey });
  return value === undefined ? undefined : { Key: TAG_LOCK_RELEASED, Value: value };
}

function noteReleased(
  context: RecordsContext,
  path: string,
  lock: HeldLock | undefined,
  tag: { Value: string } | undefined,
): void {
  if (lock === undefined || tag === undefined) return;
  context.sightings.sawReleaseMark(secretNameOf(path), tag.Value);
  context.held.released(path, lock);
}

/**
 * Records a completed rotation and the key it stored (the key id tag is part of the record, so it
 * costs no request of its own and is emptied by a record without one); with `clearIntent`, in the
 * same TagResource also overwrites the marker with the empty value when it names this rotation, so
 * the finish is one change.
 */
export async function recordRotation(
  context: RecordsContext,
  target: StoreTarget,
  rotation: RotationRecord,
  options: { clearIntent?: boolean; releaseLock?: HeldLock } = {},
): Promise<void> {
  const release = releaseTag(options.releaseLock);
  const tags: TagList = [
    { Key: TAG_LAST_ROTATED_AT, Value: rotation.rotatedAt },
    { Key: TAG_LAST_ROTATION_ID, Value: rotation.rotationId },
    { Key: TAG_LAST_VERSION, Value: rotation.version },
    { Key: TAG_LAST_KEY_ID, Value: keyIdTagValue(rotation.keyId) },
    ...(release === undefined ? [] : [release]),
  ];
  const clear =
    options.clearIntent === true && (await markerNames(context, target.path, rotation.rotationId));
  if (!clear) {
    await tagTarget(context, target.path, 'record', tags);
    noteReleased(context, target.path, options.releaseLock, release);
    return;
  }
  const settle = context.held.changeIntent(target.path);
  await tagTarget(context, target.path, 'record', [...tags, { Key: TAG_INTENT, Value: INTENT_CLEARED }]);
  settle(null);
  noteReleased(context, target.path, options.releaseLock, release);
}

/**
 * Records a drift probe: one TagResource (which also gives the probe's lock back when asked).
 * Never creates the target: a probe is of a stored secret, and a secret created empty only to
 * carry the record would be a change nobody asked for. A missing target is KR_BACKEND_NOT_FOUND
 * (the caller treats the record as best effort).
 */
export async function recordProbe(
  context: RecordsContext,
  target: StoreTarget,
  probe: ProbeRecord,
  options: { releaseLock?: HeldLock } = {},
): Promise<void> {
  const release = releaseTag(options.releaseLock);
  await context.calls.tagResource('record', target.path, [
    { Key: TAG_LAST_PROBE, Value: probeTagValue(probe) },
    ...(release === undefined ? [] : [release]),
  ]);
  context.targets.madeExist(target.path);
  noteReleased(context, target.path, options.releaseLock, release);
}

export async function recordFailure(
  context: RecordsContext,
  target: StoreTarget,
  failure: FailureRecord,
): Promise<void> {
  await tagTarget(context, target.path, 'record', [
    { Key: TAG_LAST_FAILURE, Value: failureTagValue(failure) },
    { Key: TAG_FAILURE_STREAK, Value: streakTagValue(failure) },
  ]);
}

/**
 * The key's state. The lock is read unless this process holds it with time left: then it is the
 * lock this process took (no other runner can have changed it before its expiry). `status`,
 * `plan` and the due-ness check before the lock hold no lock, so they read it. Under the lock, the
 * version AWSCURRENT is on is kept as the fenced write's compare-and-swap base (write-fenced.ts).
 */
export async function readState(
  context: RecordsContext,
  lock: LockContext,
  target: StoreTarget,
): Promise<KeyState> {
  const held = context.held.lock(target.path);
  const keep = context.held.observeIntent(target.path);
  const keepCurrent = context.held.observeCurrent(target.path);
  const heldView: LockView | undefined = held && {
    holder: { owner: held.owner, rotationId: held.rotationId, expiresAt: held.expiresAt },
    value: heldValueOf(held),
  };
  const described = describeTarget(context, target.path, 'state');
  const [description, lockView] = await Promise.all([
    described,
    heldView ?? readLockInfo(lock, target.path, described),
  ]);
  const lockInfo = lockView.holder;
  keepCurrent(description === undefined ? null : (currentVersionOf(description) ?? null));
  const tags = tagMap(description?.Tags);
  const state: KeyState = {
    exists:
      description !== undefined &&
      description.DeletedDate === undefined &&
      currentVersionOf(description) !== undefined,
  };
  const lastRotatedAt = tags.get(TAG_LAST_ROTATED_AT);
  if (lastRotatedAt !== undefined) state.lastRotatedAt = lastRotatedAt;
  const lastRotationId = tags.get(TAG_LAST_ROTATION_ID);
  if (lastRotationId !== undefined) state.lastRotationId = lastRotationId;
  // Absent on records written before keyroll recorded the key id.
  const lastKeyId = parseKeyIdTag(tags.get(TAG_LAST_KEY_ID) ?? '');
  if (lastKeyId !== undefined) state.lastKeyId = lastKeyId;
  const lastProbe = parseProbeTag(tags.get(TAG_LAST_PROBE) ?? '');
  if (lastProbe !== undefined) state.lastProbe = lastProbe;
  const intent = parseIntentTag(tags.get(TAG_INTENT) ?? '');
  if (intent !== undefined) state.intent = intent;
  keep(intent?.rotationId ?? null);
  const lastFailure = parseFailureTag(tags.get(TAG_LAST_FAILURE) ?? '', tags.get(TAG_FAILURE_STREAK) ?? '');
  if (lastFailure !== undefined) state.lastFailure = lastFailure;
  if (lockInfo !== undefined) state.lock = lockInfo;
  // A release mark that names the held lock, or the rotation whose marker is still set, without
  // proving it given back was written by someone else (issue 27): it frees nothing, and is audited.
  if (forgedReleaseMark(parseReleaseMark(tags.get(TAG_LOCK_RELEASED)), lockView.value, intent)) {
    state.doubts = [
      ...(state.doubts ?? []),
      { record: 'lock', field: 'releaseMark', problem: 'forged', action: 'ignored' },
    ];
  }
  return state;
}
