// The records keyroll keeps at a destination and reads back (KeyState in types.ts), as zod
// schemas. A record is only as trustworthy as whoever may write it, and that is not only keyroll:
// AWS grants TagResource, and Vault the metadata path, apart from writing the secret, so a record
// may be corrupt or forged by someone who cannot touch the secret itself. Every field is parsed
// here before the engine acts on it (src/rotation/trusted-state.ts checks the times against the
// clock and the policy). Each record's fields are exported one by one, so a bad field can be
// named and, where the record stays meaningful without it, left out alone.
import { z } from 'zod';

/** An ISO-8601 instant with its zone (`Z` or an offset), as keyroll writes them (toISOString). */
export const IsoInstant = z.iso
  .datetime({ offset: true })
  .refine((text) => Number.isFinite(Date.parse(text)), 'not a point in time');

/** An id or a name keyroll wrote: never empty. */
const Name = z.string().min(1);

export const IntentFields = {
  rotationId: Name,
  keyId: Name,
  owner: Name,
  startedAt: IsoInstant,
  holdUntil: IsoInstant.optional(),
  /** Only a leak's reason is ever written (invariant 6); the type stays the backends' string. */
  reason: z
    .string()
    .refine((reason): boolean => reason === 'leak' || reason === 'compromise', 'not a leak reason')
    .optional(),
  /** Secret.fingerprint: 12 hex characters of SHA-256, never the value. */
  storedFingerprint: z
    .string()
    .regex(/^[0-9a-f]{12}$/, 'not a fingerprint')
    .optional(),
};
export const Intent = z.object(IntentFields);

export const LockInfo = z.object({ owner: Name, rotationId: Name, expiresAt: IsoInstant });

export const ProbeRecord = z.object({ at: IsoInstant, result: z.enum(['works', 'dead']) });

/** The fields a failure means nothing without (which rotation, step and error, and when). */
export const FailureCoreFields = {
  rotationId: Name,
  step: Name,
  errorCode: Name,
  at: IsoInstant,
  consecutive: z.number().int().nonnegative().optional(),
};

/** The streak's times: each can be left out alone, and the record still says what failed and when. */
export const FailureStreakTimes = {
  firstAt: IsoInstant.optional(),
  nextAttemptAt: IsoInstant.optional(),
  quarantinedAt: IsoInstant.optional(),
  lastAlertedAt: IsoInstant.optional(),
};

export const FailureRecord = z.object({ ...FailureCoreFields, ...FailureStreakTimes });

/** The fields of the last rotation's record that KeyState carries one by one. */
export const RotationFields = {
  lastRotatedAt: IsoInstant,
  lastRotationId: Name,
  lastKeyId: Name,
};

/**
 * The names of `fields` whose value in `record` fails its schema (a field missing from the record
 * fails only when it is required). Not a whole-object parse: the caller decides, per field, whether
 * the record survives without it.
 */
export function badFields(fields: Readonly<Record<string, z.ZodType>>, record: object): string[] {
  const values = record as Record<string, unknown>;
  return Object.entries(fields)
    .filter(([name, schema]) => !schema.safeParse(values[name]).success)
    .map(([name]) => name);
}
