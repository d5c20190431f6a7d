// Crash recovery (invariant 6). An intent marker left behind means a run died mid-rotation.
// Under the key's lock we probe the stored secret: if it still works, the died run either never
// rolled or stored before dying, so we clear the marker and copy the working secret to any
// destination that holds something else; if it does not work, the key was rolled and the secret
// lost (or revoked by the provider), and the caller re-rolls at once.
// A leak's marker is the exception while the value it recorded is still stored (leak-marker.ts):
// its run died before storing its own secret, so the secret that still works is the leaked value,
// and the caller re-rolls at once as a leak.
// A marker whose runner may still act is never cleared (invariant 9): one whose lock this run just
// took over (that runner may be paused, or its roll still in flight) or one held until a later
// time (`holdUntil`). Such a marker stays, and later runs probe again.
import { errorCode } from '../errors.ts';
import type { Intent, StoredSecret, WriteFence } from '../backends/public/types.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { leakLeftOpen, type LeakLeftOpen } from './leak-marker.ts';
import type { ResolvedDestination, RotationDeps } from './types.ts';
import type { AuditLog } from '../audit/public/events.ts';

export type RecoveryVerdict =
  /**
   * The stored secret works: nothing to re-roll. `failed` names destinations that could not be
   * given the working secret; `completed` is set when the died run had stored its own secret
   * (its rotation is recorded now, so the key is not rotated twice).
   */
  | {
      kind: 'stored-secret-works';
      repaired: string[];
      failed: string[];
      completed?: { rotationId: string; rotatedAt: string };
      kept?: MarkerKept;
    }
  /** The stored secret is dead or missing: the key must be re-rolled now. */
  | { kind: 'reroll'; why: 'stored-secret-dead' | 'no-stored-secret' | 'probe-failed'; errorCode?: string }
  /** A leak's rotation died before storing: the working stored secret is the leaked one. */
  | { kind: 'reroll'; why: 'leak-not-rolled'; leak: LeakLeftOpen };

/** Why a marker stays although the stored secret works. */
export type MarkerKept = 'lock-taken-over' | 'held-until';

/**
 * Whether the runner that left `intent` may still act on it: this run took its lock over (it
 * may be paused or have a roll in flight), or the marker says to hold it until a later time.
 */
export function markerMayStillBeActedOn(
  intent: Intent,
  tookOver: boolean,
  now: Date,
): MarkerKept | undefined {
  if (intent.holdUntil !== undefined && Date.parse(intent.holdUntil) > now.getTime()) return 'held-until';
  if (tookOver) return 'lock-taken-over';
  return undefined;
}

async function probeStandby(
  key: KeyPolicy,
  primary: ResolvedDestination,
  deps: RotationDeps,
  audit: AuditLog,
): Promise<void> {
  try {
    const previous = await primary.backend.readPrevious?.(primary.target);
    if (!previous) return;
    const verdict = await deps.api.probeSecret(previous.secret, { organizationId: key.organizationId });
    audit.emit('key.probe', {
      step: 'recovery',
      slot: 'standby',
      verdict: verdict === 'valid' ? 'stored-secret-works' : 'stored-secret-dead',
    });
  } catch (error) {
    audit.emit('key.probe', {
      step: 'recovery',
      slot: 'standby',
      verdict: 'probe-failed',
      errorCode: errorCode(error),
    });
  }
}

export async function recoverLeftoverIntent(
  key: KeyPolicy,
  intent: Intent,
  destinations: readonly ResolvedDestination[],
  deps: RotationDeps,
  audit: AuditLog,
  options: {
    tookOver: boolean;
    /** The fence of a repair write to a destination: its lock, held by this rotation (invariant 9). */
    fenceFor?: (destination: ResolvedDestination) => WriteFence | undefined;
  },
): Promise<RecoveryVerdict> {
  const [primary, ...others] = destinations;
  if (!primary) throw new Error('a key has at least one destination');
  audit.emit('key.recovery.started', {
    step: 'recovery',
    leftRotationId: intent.rotationId,
    leftBy: intent.owner,
    leftAt: intent.startedAt,
  });

  let stored;
  try {
    stored = await primary.backend.readSecret(primary.target);
  } catch (error) {
    return { kind: 'reroll', why: 'probe-failed', errorCode: errorCode(error) };
  }
  if (!stored) return { kind: 'reroll', why: 'no-stored-secret' };

  let verdict: 'valid' | 'invalid';
  try {
    verdict = await deps.api.probeSecret(stored.secret, { organizationId: key.organizationId });
  } catch (error) {
    // The API is unreachable or refuses for another reason: a re-roll is always safe, and the
    // roll step will meet the same error and report it properly.
    return { kind: 'reroll', why: 'probe-failed', errorCode: errorCode(error) };
  }
  audit.emit('key.probe', {
    step: 'recovery',
    verdict: verdict === 'valid' ? 'stored-secret-works' : 'stored-secret-dead',
    ...(key.slots ? { slot: 'active' } : {}),
  });
  // A two-slot entry: the standby's value (where the backend keeps it) is probed too, so the
  // audit says whether consumers that have not refreshed yet still hold a working secret.
  if (key.slots) await probeStandby(key, primary, deps, audit);
  if (verdict === 'invalid') return { kind: 'reroll', why: 'stored-secret-dead' };
  const leak = leakLeftOpen(intent, stored);
  if (leak !== undefined) return leakVerdict(intent, leak, options.tookOver, deps, audit);

  // The primary holds a working secret; make sure the other destinations hold the same one.
  const { repaired, failed } = await repairOthers(key, intent, stored, others, deps, options.fenceFor);
  const kept = markerMayStillBeActedOn(intent, options.tookOver, deps.now());
  if (kept !== undefined) {
    audit.emit('key.intent.kept', {
      step: 'recovery',
      keptRotationId: intent.rotationId,
      why: kept,
      holdUntil: intent.holdUntil,
    });
    return { kind: 'stored-secret-works', repaired, failed, kept };
  }
  // The died run stored its own secret before dying: record its rotation, so the key is not
  // rolled again (which would kill a secret consumers may already have loaded).
  // A destination that could not be repaired keeps the marker, so the next run tries again.
  const clearIntent = failed.length === 0;
  let completed: { rotationId: string; rotatedAt: string } | undefined;
  if (stored.rotationId === intent.rotationId) {
    completed = { rotationId: intent.rotationId, rotatedAt: intent.startedAt };
    await primary.backend.recordRotation(
      primary.target,
      { ...completed, version: stored.version ?? 'unknown', keyId: intent.keyId },
      { clearIntent },
    );
  } else if (clearIntent) {
    await primary.backend.clearIntent(primary.target, intent.rotationId);
  }
  if (clearIntent)
    audit.emit('key.intent.cleared', { step: 'recovery', clearedRotationId: intent.rotationId });
  return { kind: 'stored-secret-works', repaired, failed, ...(completed ? { completed } : {}) };
}

/**
 * The died run answered a leak and stored nothing: what works is the leaked value (or, for a slot
 * entry, the slot beside it). Copying it anywhere or clearing the marker would leave the leak open
 * with nobody to close it; it is rolled now, whoever may still act. A runner that may still act
 * keeps its marker until this rotation's own replaces it, held past it (step-decide.ts), and the
 * audit says so, as for any marker taken over.
 */
function leakVerdict(
  intent: Intent,
  leak: LeakLeftOpen,
  tookOver: boolean,
  deps: RotationDeps,
  audit: AuditLog,
): RecoveryVerdict {
  const kept = markerMayStillBeActedOn(intent, tookOver, deps.now());
  if (kept !== undefined)
    audit.emit('key.intent.kept', {
      step: 'recovery',
      keptRotationId: intent.rotationId,
      why: kept,
      holdUntil: intent.holdUntil,
    });
  return { kind: 'reroll', why: 'leak-not-rolled', leak };
}

/** Copies the primary's working secret to each other destination that holds another value. */
async function repairOthers(
  key: KeyPolicy,
  intent: Intent,
  stored: StoredSecret,
  others: readonly ResolvedDestination[],
  deps: RotationDeps,
  fenceFor: ((destination: ResolvedDestination) => WriteFence | undefined) | undefined,
): Promise<{ repaired: string[]; failed: string[] }> {
  const repaired: string[] = [];
  const failed: string[] = [];
  for (const destination of others) {
    try {
      const copy = await destination.backend.readSecret(destination.target);
      if (copy?.secret.digest() === stored.secret.digest()) continue;
      const record = {
        secret: stored.secret,
        keyId: key.id,
        organizationId: key.organizationId,
        rotationId: stored.rotationId ?? intent.rotationId,
        rotatedAt: deps.now().toISOString(),
      };
      // Under the destination's own lock, like the store step's writes: a runner that lost it
      // meanwhile copies nothing over what the new holder stored (invariant 9).
      const fence = fenceFor?.(destination);
      await (fence === undefined
        ? destination.backend.writeSecret(destination.target, record)
        : destination.backend.writeSecret(destination.target, record, fence));
      repaired.push(`${destination.backendName}:${destination.target.path}`);
    } catch (error) {
      failed.push(`${destination.backendName}:${destination.target.path} (${errorCode(error)})`);
    }
  }
  return { repaired, failed };
}
