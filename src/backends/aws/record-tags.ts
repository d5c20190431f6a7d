// keyroll's bookkeeping on an AWS secret lives in its tags, which carry no secret and do not
// create secret versions: the intent marker (invariant 6), the last completed rotation (for
// due-ness and `status`) and the last failure. Tag values are capped at 256 characters, and
// while Secrets Manager itself checks only the length, tag policies and other AWS services
// accept only letters, digits, spaces and `+ - = . _ : / @`. So each record is one tag whose
// value is its fields joined by spaces, each field escaped to that alphabet (`@XX` per byte).
import type { FailureRecord, Intent, ProbeRecord } from '../types.ts';

export const TAG_MANAGED_BY = 'managed-by';
export const MANAGED_BY_VALUE = 'keyroll';
export const TAG_INTENT = 'keyroll:intent';
/**
 * The intent marker's value once cleared: TagResource cannot remove a tag, and the finish step
 * records the rotation and clears the marker in one TagResource. Parses as no intent. A marker
 * cleared on its own is overwritten the same way (no UntagResource: one IAM action and one
 * request of the tag quota less).
 */
export const INTENT_CLEARED = '';
export const TAG_LAST_ROTATED_AT = 'keyroll:last-rotated-at';
export const TAG_LAST_ROTATION_ID = 'keyroll:last-rotation-id';
export const TAG_LAST_VERSION = 'keyroll:last-version';
export const TAG_LAST_FAILURE = 'keyroll:last-failure';
/**
 * The failure streak beside the last failure (backoff and quarantine): `consecutive firstAt
 * nextAttemptAt quarantinedAt lastAlertedAt`, `-` for a field the record lacks, empty for a record
 * without a streak. A tag of its own, written in the same TagResource as the last failure, so the
 * last failure's four fields read as before (older keyrolls) and neither is cut to fit 256 characters.
 */
export const TAG_FAILURE_STREAK = 'keyroll:failure-streak';
/**
 * The API key whose secret the last recorded rotation stored (for a two-slot entry, the active
 * slot; invariant 10). Written in the same TagResource as the rotation's other tags, empty when the
 * record names no key, so it never outlives the record it belongs to.
 */
export const TAG_LAST_KEY_ID = 'keyroll:last-key-id';
/** The last drift probe of the stored secret: `at result`. */
export const TAG_LAST_PROBE = 'keyroll:last-probe';
/** Written by preflight to prove TagResource works; its value is the time of the check. */
export const TAG_PREFLIGHT = 'keyroll:preflight';
/**
 * `owner rotationId releaseKey` of a key lock given back in the finish step's own TagResource
 * (lock/lock.ts): a lock value of that owner and rotation whose `releaseDigest` is the digest of that
 * release key is free. Releasing it this way costs no request of its own, where the lock's
 * compare-and-swap costs two of the account's write quota. The release key is proof, not a name:
 * only the process that took the lock knows it until this tag publishes it (lock/value.ts), so a
 * principal that may only tag the secret cannot free a lock that is still held.
 */
export const TAG_LOCK_RELEASED = 'keyroll:lock-released';

export const MAX_TAG_VALUE_LENGTH = 256;

export interface Tag {
  Key?: string | undefined;
  Value?: string | undefined;
}

const PLAIN = /^[A-Za-z0-9_.:/=+-]$/;

/** Escapes one field to the portable tag alphabet; spaces are kept free as the separator. */
export function escapeTagField(field: string): string {
  let out = '';
  for (const char of field) {
    if (PLAIN.test(char)) {
      out += char;
      continue;
    }
    for (const byte of Buffer.from(char, 'utf8'))
      out += `@${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

export function unescapeTagField(field: string): string {
  const bytes: number[] = [];
  for (let i = 0; i < field.length;) {
    const escape = /^@([0-9A-F]{2})/.exec(field.slice(i, i + 3));
    if (escape?.[1] !== undefined) {
      bytes.push(Number.parseInt(escape[1], 16));
      i += 3;
    } else {
      bytes.push(...Buffer.from(field.charAt(i), 'utf8'));
      i += 1;
    }
  }
  return Buffer.from(bytes).toString('utf8');
}

/**
 * Joins fields into one tag value within `max` characters (256). Fields come most important first:
 * when too long, the last ones are cut (at an escape boundary), never the first.
 */
export function joinTagFields(fields: readonly string[], max = MAX_TAG_VALUE_LENGTH): string {
  const escaped = fields.map(escapeTagField);
  let total = escaped.reduce((sum, field) => sum + field.length, 0) + escaped.length - 1;
  for (let i = escaped.length - 1; i > 0 && total > max; i--) {
    const field = escaped[i] ?? '';
    const keep = Math.max(0, field.length - (total - max));
    const cut = field.slice(0, keep).replace(/@[0-9A-F]?$/, '');
    total -= field.length - cut.length;
    escaped[i] = cut;
  }
  return escaped.join(' ');
}

export function splitTagFields(value: string): string[] {
  return value.split(' ').map(unescapeTagField);
}

/**
 * The intent marker: `rotationId startedAt keyId owner`, plus ` holdUntil` when the marker carries
 * one (invariant 9) and ` holdUntil reason storedFingerprint` when it answers a leak (invariant 6;
 * holdUntil then empty when it has none, the fingerprint left out when nothing was stored). The optional fields go last, so a
 * marker written before they existed (4 or 5 fields) still parses, and a keyroll that predates
 * them still reads the fields it knows right (an empty holdUntil reads as none). They are never
 * cut: the four fields before them share what is left of the 256 characters (keyId and owner are
 * cut first).
 */
export function intentTagValue(intent: Intent): string {
  const fields = [intent.rotationId, intent.startedAt, intent.keyId, intent.owner];
  if (intent.holdUntil === undefined && intent.reason === undefined) return joinTagFields(fields);
  const fingerprint = intent.storedFingerprint === undefined ? [] : [intent.storedFingerprint];
  const leak = intent.reason === undefined ? [] : [intent.reason, ...fingerprint];
  const tail = [intent.holdUntil ?? '', ...leak].map(escapeTagField).join(' ');
  return `${joinTagFields(fields, MAX_TAG_VALUE_LENGTH - tail.length - 1)} ${tail}`;
}

export function parseIntentTag(value: string): Intent | undefined {
  const [rotationId, startedAt, keyId, owner, holdUntil, reason, storedFingerprint] = splitTagFields(value);
  if (!rotationId || startedAt === undefined || keyId === undefined || owner === undefined) return undefined;
  return {
    rotationId,
    startedAt,
    keyId,
    owner,
    ...(holdUntil ? { holdUntil } : {}),
    ...(reason ? { reason } : {}),
    ...(reason && storedFingerprint ? { storedFingerprint } : {}),
  };
}

export function failureTagValue(failure: FailureRecord): string {
  return joinTagFields([failure.rotationId, failure.at, failure.errorCode, failure.step]);
}

/**
 * The last failure. A tag that is not keyroll's format still reads, with its missing fields empty
 * and a bad count as NaN: the record schema (src/backends/schema.ts) then names what is wrong and
 * the engine audits it, where dropping it here would hide a forged or corrupt record.
 */
export function parseFailureTag(value: string, streak = ''): FailureRecord | undefined {
  if (value === '') return undefined;
  const [rotationId = '', at = '', errorCode = '', step = ''] = splitTagFields(value);
  return { rotationId, at, errorCode, step, ...parseStreakTag(streak) };
}

const STREAK_ABSENT = '-';
const STREAK_TIMES = ['firstAt', 'nextAttemptAt', 'quarantinedAt', 'lastAlertedAt'] as const;

export function streakTagValue(failure: FailureRecord): string {
  if (failure.consecutive === undefined) return '';
  return joinTagFields([
    String(failure.consecutive),
    ...STREAK_TIMES.map((field) => failure[field] ?? STREAK_ABSENT),
  ]);
}

function parseStreakTag(value: string): Partial<FailureRecord> {
  if (value === '') return {};
  const [consecutive = '', ...times] = splitTagFields(value);
  const streak: Partial<FailureRecord> = {
    consecutive: /^\d+$/.test(consecutive) ? Number(consecutive) : Number.NaN,
  };
  STREAK_TIMES.forEach((field, index) => {
    const time = times[index];
    if (time !== undefined && time !== STREAK_ABSENT && time !== '') streak[field] = time;
  });
  return streak;
}

/**
 * The key id as one whole field, or empty (no key id) when it would not fit in a tag value: a key
 * id cut short would name another key, and an unknown one lets the engine fall back to the stored
 * value's keyId field. API key ids are far shorter than 256 characters.
 */
export function keyIdTagValue(keyId: string | undefined): string {
  if (keyId === undefined) return '';
  const escaped = escapeTagField(keyId);
  return escaped.length <= MAX_TAG_VALUE_LENGTH ? escaped : '';
}

export function parseKeyIdTag(value: string): string | undefined {
  return value === '' ? undefined : unescapeTagField(value);
}

export function probeTagValue(probe: ProbeRecord): string {
  return joinTagFields([probe.at, probe.result]);
}

export function parseProbeTag(value: string): ProbeRecord | undefined {
  const [at, result] = splitTagFields(value);
  if (!at || (result !== 'works' && result !== 'dead')) return undefined;
  return { at, result };
}

/** The tags as a map; later duplicates win (AWS never returns duplicates). */
export function tagMap(tags: readonly Tag[] | undefined): Map<string, string> {
  const map = new Map<string, string>();
  for (const tag of tags ?? []) {
    if (tag.Key !== undefined) map.set(tag.Key, tag.Value ?? '');
  }
  return map;
}

/** Tags for a secret keyroll creates: the configured ones plus `managed-by=keyroll`, which always wins. */
export function creationTags(configured: Readonly<Record<string, string>>): { Key: string; Value: string }[] {
  const tags = Object.entries(configured)
    .filter(([key]) => key !== TAG_MANAGED_BY)
    .map(([Key, Value]) => ({ Key, Value }));
  tags.push({ Key: TAG_MANAGED_BY, Value: MANAGED_BY_VALUE });
  return tags;
}

/**
 * The `keyroll:lock-released` value for the lock of `owner` and `rotationId` taken with
 * `releaseKey`; undefined when it would not fit a tag whole (a cut value could name another lock:
 * that lock is released the usual way).
 */
export function lockReleasedTagValue(lock: {
  owner: string;
  rotationId: string;
  releaseKey: string;
}): string | undefined {
  const value = [lock.owner, lock.rotationId, lock.releaseKey].map(escapeTagField).join(' ');
  return value.length <= MAX_TAG_VALUE_LENGTH ? value : undefined;
}

/** A release mark as written: the lock it names and the release key it shows (absent in marks of earlier keyrolls). */
export interface ReleaseMark {
  owner: string;
  rotationId: string;
  releaseKey?: string;
}

export function parseReleaseMark(value: string | undefined): ReleaseMark | undefined {
  if (value === undefined || value === '') return undefined;
  const [owner, rotationId, releaseKey] = splitTagFields(value);
  if (owner === undefined || rotationId === undefined) return undefined;
  return { owner, rotationId, ...(releaseKey === undefined || releaseKey === '' ? {} : { releaseKey }) };
}
