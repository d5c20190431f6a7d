// What a leak rotation's intent marker says (invariant 6), and what recovery reads from it. A leak
// rotation that dies after its marker and before its roll leaves the leaked value stored and
// working: "the stored secret works" then means the leak is still open, not that nothing died.
// But a working value under a leak marker may also be one stored since (a secret the operator
// restored from escrow after a died run whose roll did happen): re-rolling that would kill a good
// secret. So the marker records the fingerprint of the value stored when it was written, and
// recovery re-rolls only while that same value is stored.
import type { Secret } from '../audit/public/secret.ts';
import type { Intent, StoredSecret } from '../backends/public/types.ts';
import { isLeakReason } from './types.ts';

/** A leak a died run did not answer: the re-roll answers it as a leak and proves the value dead. */
export interface LeakLeftOpen {
  reason: 'leak' | 'compromise';
  /** The API key (or slot) the died run was rolling. */
  rollKeyId: string;
  /** The leaked value, when the stored secret is that key's (a slot entry's standby is not stored). */
  leaked?: Secret;
}

/**
 * The marker's leak fields: the reason, and the fingerprint of `stored`, the primary's value read
 * under the lock just before the marker. For a single key, or a leak of a two-slot entry's active
 * slot, that is the leaked value itself; for a leak of the standby, the active value the roll's
 * store will replace. Either way the run changes it only by storing, so recovery finding the same
 * value means the run stored nothing and nobody put anything there since.
 */
export function leakMarkerFields(
  reason: string | undefined,
  stored: StoredSecret | undefined,
): Pick<Intent, 'reason' | 'storedFingerprint'> {
  if (reason === undefined || !isLeakReason(reason)) return {};
  return { reason, ...(stored === undefined ? {} : { storedFingerprint: stored.secret.fingerprint() }) };
}

/**
 * The leak `intent` left open, when the working `stored` value is the one its marker recorded: its
 * run stored nothing, so the leaked value (or, for a standby's leak, the slot beside it) is still
 * alive. Undefined for a marker that answers no leak, one that recorded no stored value (nothing
 * was stored then, so nothing stored now is the leaked value), and a value stored since (the run's
 * own, or one restored by hand): those are recovered as any marker.
 */
export function leakLeftOpen(intent: Intent, stored: StoredSecret): LeakLeftOpen | undefined {
  const { reason, storedFingerprint } = intent;
  if (reason === undefined || !isLeakReason(reason) || storedFingerprint === undefined) return undefined;
  if (stored.secret.fingerprint() !== storedFingerprint) return undefined;
  const leakedStored = stored.keyId === undefined || stored.keyId === intent.keyId;
  return { reason, rollKeyId: intent.keyId, ...(leakedStored ? { leaked: stored.secret } : {}) };
}
