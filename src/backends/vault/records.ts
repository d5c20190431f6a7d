// keyroll's bookkeeping in a Vault secret's custom_metadata (string keys and string values of at
// most 512 bytes): the intent marker, the last rotation (with the API key it stored: a two-slot
// entry's active slot), the last drift probe, the last failure and which rotation wrote which
// version. Keys are prefixed `keyroll_` so an operator's own keys sit beside them.
import { z } from 'zod';
import type { DoubtedRecord, FailureRecord, Intent, KeyState, ProbeRecord, RecordDoubt } from '../types.ts';

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

// holdUntil (invariant 9) is optional: markers written by older keyrolls lack it and still read.
const StoredIntent = z.object({ rotationId: z.string(), keyId: z.string(), owner: z.string(), startedAt: z.string(), holdUntil: z.string().optional() });
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
  const { rotationId, keyId, owner, startedAt, holdUntil } = intent;
  return JSON.stringify({ rotationId, keyId, owner, startedAt, ...(holdUntil === undefined ? {} : { holdUntil }), ...(writeVersion === undefined ? {} : { writeVersion }) });
}

export function encodeFailure(failure: FailureRecord): string {
  const { rotationId, step, errorCode, at, consecutive, firstAt, nextAttemptAt, quarantinedAt, lastAlertedAt } = failure;
  // JSON.stringify leaves out the streak fields a record does not have.
  return JSON.stringify({ rotationId, step, errorCode, at, consecutive, firstAt, nextAttemptAt, quarantinedAt, lastAlertedAt });
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
  const decode = <T>(record: DoubtedRecord, text: string | undefined, schema: z.ZodType<T>): T | undefined => {
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
