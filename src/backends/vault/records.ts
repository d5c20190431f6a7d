// keyroll's bookkeeping in a Vault secret's custom_metadata (string keys and string values of at
// most 512 bytes): the intent marker, the last rotation (with the API key it stored: a two-slot
// entry's active slot), the last drift probe, the last failure and which rotation wrote which
// version. Keys are prefixed `keyroll_` so an operator's own keys sit beside them. Below the
// encoding, the bookkeeping operations of the backend: each is one custom_metadata change that sets
// or removes only its own keys.
import { z } from 'zod';
import type { BackendOperation } from '../errors.ts';
import type {
  DoubtedRecord,
  FailureRecord,
  Intent,
  KeyState,
  LockInfo,
  ProbeRecord,
  RecordDoubt,
  RotationRecord,
} from '../types.ts';
import type { PathKnowledgeMap } from './known.ts';
import type { CustomMetadataPatch, KvMetadata, KvV2 } from './kv.ts';
import { lockInfo, readLockEntry } from './lock.ts';

export const META = {
  intent: 'keyroll_intent',
  lastRotatedAt: 'keyroll_last_rotated_at',
  lastRotationId: 'keyroll_last_rotation_id',
  lastRotationVersion: 'keyroll_last_rotation_version',
  /** The API key the last rotation stored (invariant 10); absent in metadata of older keyrolls. */
  lastKeyId: 'keyroll_last_key_id',
  lastProbe: 'keyroll_last_probe',
  lastFailure: 'keyroll_last_failure',
  lastWriteRotationId: 'keyroll_last_write_rotation_id',
  lastWriteVersion: 'keyroll_last_write_version',
  /** `{"version":N,"of":M}`: version N is a copy of version M written by a lock takeover (takeover.ts). */
  copiedVersion: 'keyroll_copied_version',
} as const;

// holdUntil (invariant 9), reason and storedFingerprint (a leak, invariant 6) are optional:
// markers written by older keyrolls lack them and still read.
const StoredIntent = z.object({
  rotationId: z.string(),
  keyId: z.string(),
  owner: z.string(),
  startedAt: z.string(),
  holdUntil: z.string().optional(),
  reason: z.string().optional(),
  storedFingerprint: z.string().optional(),
});
/** The version the marked rotation's data write will create, when it was known before the roll. */
const IntendedWrite = z.object({ rotationId: z.string(), writeVersion: z.number().int().positive() });
// The streak fields (backoff and quarantine) are optional: failures written by older keyrolls lack them and still read.
const StoredFailure = z.object({
  rotationId: z.string(),
  step: z.string(),
  errorCode: z.string(),
  at: z.string(),
  consecutive: z.number().int().nonnegative().optional(),
  firstAt: z.string().optional(),
  nextAttemptAt: z.string().optional(),
  quarantinedAt: z.string().optional(),
  lastAlertedAt: z.string().optional(),
});
const StoredProbe = z.object({ at: z.string(), result: z.enum(['works', 'dead']) });

function parseJson<T>(text: string | undefined, schema: z.ZodType<T>): T | undefined {
  return decodeJson(text, schema).value;
}

/** The record in `text`; `unreadable` when there is one but it is not JSON of the record's shape. */
function decodeJson<T>(text: string | undefined, schema: z.ZodType<T>): { value?: T; unreadable?: true } {
  if (text === undefined) return {};
  try {
    const parsed = schema.safeParse(JSON.parse(text));
    return parsed.success ? { value: parsed.data } : { unreadable: true };
  } catch {
    return { unreadable: true };
  }
}

/**
 * The intent marker; `writeVersion` is the version the rotation's data write will create (the
 * check-and-set version it writes against, plus one), so the version names its rotation from
 * the moment it exists, before any bookkeeping after the write (see readIntendedWrite).
 */
export function encodeIntent(intent: Intent, writeVersion?: number): string {
  const { rotationId, keyId, owner, startedAt, holdUntil, reason, storedFingerprint } = intent;
  return JSON.stringify({
    rotationId,
    keyId,
    owner,
    startedAt,
    ...(holdUntil === undefined ? {} : { holdUntil }),
    ...(reason === undefined ? {} : { reason }),
    ...(storedFingerprint === undefined ? {} : { storedFingerprint }),
    ...(writeVersion === undefined ? {} : { writeVersion }),
  });
}

export function encodeFailure(failure: FailureRecord): string {
  const {
    rotationId,
    step,
    errorCode,
    at,
    consecutive,
    firstAt,
    nextAttemptAt,
    quarantinedAt,
    lastAlertedAt,
  } = failure;
  // JSON.stringify leaves out the streak fields a record does not have.
  return JSON.stringify({
    rotationId,
    step,
    errorCode,
    at,
    consecutive,
    firstAt,
    nextAttemptAt,
    quarantinedAt,
    lastAlertedAt,
  });
}

export function encodeProbe(probe: ProbeRecord): string {
  const { at, result } = probe;
  return JSON.stringify({ at, result });
}

export function readIntent(meta: Record<string, string>): Intent | undefined {
  return parseJson(meta[META.intent], StoredIntent);
}

/** The rotation whose intent marker says its write creates `version`, if one does. */
function readIntendedWrite(meta: Record<string, string>, version: number): string | undefined {
  const intended = parseJson(meta[META.intent], IntendedWrite);
  return intended?.writeVersion === version ? intended.rotationId : undefined;
}

/** The rotation that wrote `version`: the record written after the write, else the marker's forecast. */
export function writerOf(meta: Record<string, string>, version: number): string | undefined {
  if (meta[META.lastWriteVersion] === String(version)) return meta[META.lastWriteRotationId];
  return readIntendedWrite(meta, version);
}

/** The KeyState fields kept in custom_metadata (exists and lock come from elsewhere). */
export function stateFromMetadata(meta: Record<string, string>): Omit<KeyState, 'exists' | 'lock'> {
  const state: Omit<KeyState, 'exists' | 'lock'> = {};
  const lastRotatedAt = meta[META.lastRotatedAt];
  const lastRotationId = meta[META.lastRotationId];
  // A record that does not decode is noted, not dropped in silence: trustState audits it.
  const doubts: RecordDoubt[] = [];
  const decode = <T>(
    record: DoubtedRecord,
    text: string | undefined,
    schema: z.ZodType<T>,
  ): T | undefined => {
    const { value, unreadable } = decodeJson(text, schema);
    if (unreadable) doubts.push({ record, problem: 'malformed', action: 'ignored' });
    return value;
  };
  const intent = decode('intent', meta[META.intent], StoredIntent);
  const lastFailure = decode('lastFailure', meta[META.lastFailure], StoredFailure);
  const lastKeyId = meta[META.lastKeyId];
  const lastProbe = decode('lastProbe', meta[META.lastProbe], StoredProbe);
  if (lastRotatedAt !== undefined) state.lastRotatedAt = lastRotatedAt;
  if (lastRotationId !== undefined) state.lastRotationId = lastRotationId;
  if (lastKeyId !== undefined) state.lastKeyId = lastKeyId;
  if (lastProbe !== undefined) state.lastProbe = lastProbe;
  if (intent !== undefined) state.intent = intent;
  if (lastFailure !== undefined) state.lastFailure = lastFailure;
  if (doubts.length > 0) state.doubts = doubts;
  return state;
}

/** What the bookkeeping operations work with: the KV calls and what this process knows per path. */
export interface RecordsContext {
  kv: KvV2;
  known: PathKnowledgeMap;
}

/**
 * One custom_metadata change, starting from what this process knows of the metadata while it
 * holds the lock (kv.ts decides whether the server can check that base), and remembering what the
 * change left while it still holds the lock. A change that fails leaves the metadata unknown.
 */
export async function changeMetadata(
  context: RecordsContext,
  path: string,
  patch: (current: Record<string, string>) => CustomMetadataPatch,
  operation: BackendOperation,
): Promise<void> {
  const known = context.known.of(path);
  const after = await context.kv.updateCustomMetadata(path, patch, operation, known.changingMetadata());
  known.changedMetadata(after);
}

export async function setIntent(context: RecordsContext, path: string, intent: Intent): Promise<void> {
  const known = context.known.of(path);
  // The write after the roll checks-and-sets against the version known now, so it creates the next one.
  const writeVersion = known.markingIntent();
  await changeMetadata(
    context,
    path,
    () => ({ [META.intent]: encodeIntent(intent, writeVersion) }),
    'intent',
  );
  if (writeVersion !== undefined) known.markedIntent(intent.rotationId, writeVersion);
}

export async function clearIntent(context: RecordsContext, path: string, rotationId: string): Promise<void> {
  // Checked on the map the change starts from, so an intent set meanwhile by another rotation stays.
  await changeMetadata(
    context,
    path,
    (meta) => (readIntent(meta)?.rotationId === rotationId ? { [META.intent]: null } : undefined),
    'intent',
  );
}

export async function recordRotation(
  context: RecordsContext,
  path: string,
  rotation: RotationRecord,
  options: { clearIntent?: boolean },
): Promise<void> {
  const writeVersion = /^[1-9]\d*$/.test(rotation.version) ? rotation.version : undefined;
  await changeMetadata(
    context,
    path,
    (meta) => ({
      [META.lastRotatedAt]: rotation.rotatedAt,
      [META.lastRotationId]: rotation.rotationId,
      [META.lastRotationVersion]: rotation.version,
      // In the same change as the rotation it belongs to (no extra request). A record without a
      // key id (a single key, an older caller) removes it: it names the last rotation's key only.
      [META.lastKeyId]: rotation.keyId ?? null,
      // The rotation wrote this version: recorded for good here, with the finish, in the same change.
      ...(writeVersion === undefined
        ? {}
        : { [META.lastWriteRotationId]: rotation.rotationId, [META.lastWriteVersion]: writeVersion }),
      // Checked on the map the change starts from, so an intent set meanwhile by another rotation stays.
      ...(options.clearIntent === true && readIntent(meta)?.rotationId === rotation.rotationId
        ? { [META.intent]: null }
        : {}),
    }),
    'record',
  );
}

export async function recordProbe(context: RecordsContext, path: string, probe: ProbeRecord): Promise<void> {
  // Only the lastProbe key, like recordFailure: the intent marker and the rotation record stay.
  await changeMetadata(context, path, () => ({ [META.lastProbe]: encodeProbe(probe) }), 'record');
}

export async function recordFailure(
  context: RecordsContext,
  path: string,
  failure: FailureRecord,
): Promise<void> {
  // Only the lastFailure key: an intent marker or lock-holder bookkeeping written meanwhile stays.
  await changeMetadata(context, path, () => ({ [META.lastFailure]: encodeFailure(failure) }), 'record');
}

export async function readState(context: RecordsContext, path: string): Promise<KeyState> {
  // Right after taking the lock: what acquireLock read under it. Everyone else (status, plan,
  // due-ness before the lock, a second look) reads the server.
  const afterLock = context.known.of(path).takeStateReadUnderLock();
  if (afterLock !== undefined) return afterLock;
  const [metadata, entry] = await Promise.all([
    context.kv.readMetadata(path, 'state'),
    readLockEntry(context.kv, path, 'state'),
  ]);
  return stateOf(metadata, lockInfo(entry));
}

/** The key's state from the secret's metadata and its lock entry. */
export function stateOf(metadata: KvMetadata | undefined, lock: LockInfo | undefined): KeyState {
  return {
    exists: metadata?.liveCurrentVersion ?? false,
    ...stateFromMetadata(metadata?.customMetadata ?? {}),
    ...(lock === undefined ? {} : { lock }),
  };
}
