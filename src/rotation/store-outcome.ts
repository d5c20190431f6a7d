// What happens after the store step, once the secret is durable somewhere (or nowhere):
// the audit events of the roll and the writes (emitted only now, invariant 2), and for a store
// that did not reach every destination the critical alert that says where the secret is and
// what happens next (invariant 4).
import type { AuditLog } from '../audit/public/events.ts';
import type { FailureRecord } from '../backends/public/types.ts';
import { catalogueCode, typedCode } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { sendAlert } from './key-alert.ts';
import type { RollSuccess } from './roll.ts';
import type { StoreReport } from './store.ts';
import type { KeyOutcome, OutcomeEnd, OutcomeFacts, ResolvedDestination, RotationDeps } from './types.ts';

export async function recordFailureBestEffort(
  primary: ResolvedDestination,
  failure: FailureRecord,
): Promise<void> {
  try {
    await primary.backend.recordFailure(primary.target, failure);
  } catch {
    // The audit event and alert already carry the failure. Without the record the next run sees
    // the streak as it was, so it alerts again rather than staying quiet (failure-streak.ts).
  }
}

export function auditStore(
  audit: AuditLog,
  rolled: RollSuccess,
  report: StoreReport,
  answeredAtMs: number,
): void {
  audit.emit('key.rolled', {
    step: 'roll',
    fingerprint: rolled.secret.fingerprint(),
    rolls: rolled.rolls,
    ...(rolled.unknownOutcomes.length > 0 ? { unknownOutcomes: rolled.unknownOutcomes } : {}),
    ...(rolled.malformed ? { malformedAnswer: rolled.malformed } : {}),
  });
  for (const retry of report.retries) audit.emit('key.store.retry', { step: 'store', ...retry });
  for (const copy of report.stored) {
    audit.emit(copy.role === 'fallback' ? 'key.store.fallback' : 'key.stored', {
      step: 'store',
      backend: copy.destination.backendName,
      path: copy.destination.target.path,
      version: copy.version,
      attempts: copy.attempts,
      alreadyApplied: copy.alreadyApplied,
      exposureMs: Math.round(copy.atMs - answeredAtMs),
    });
  }
  if (report.escrow && 'path' in report.escrow) {
    audit.emit('key.escrowed', {
      step: 'store',
      path: report.escrow.path,
      fingerprint: report.escrow.fingerprint,
    });
  }
}

export async function storeFailed(
  key: KeyPolicy,
  rotationId: string,
  rotatedAt: string,
  report: StoreReport,
  exposureMs: number | undefined,
  deps: RotationDeps,
  audit: AuditLog,
  outcome: (end: OutcomeEnd, extra?: Partial<OutcomeFacts>) => KeyOutcome,
  /** The API key whose secret was stored (a two-slot entry's rolled slot). */
  storedKeyId: string = key.id,
  /**
   * A two-slot entry that rolled its standby: the active slot, whose secret the primary still
   * holds and consumers still use (invariant 10). Nothing they use died.
   */
  activeSlot?: string,
): Promise<KeyOutcome> {
  const failedPlaces = report.failed
    .filter((f) => f.role === 'destination')
    .map((f) => `${f.destination.backendName}:${f.destination.target.path} (${f.errorCode})`);
  const firstCode = report.failed[0]?.errorCode ?? 'KR_STORE_FAILED';
  const held = report.stored.map(
    (copy) =>
      `${copy.destination.backendName}:${copy.destination.target.path}${copy.role === 'fallback' ? ' (a fallback)' : ''}`,
  );
  const exposure = exposureMs === undefined ? {} : { exposureMs };
  if (report.lockLost !== undefined) {
    const summary = await reportLockLost(key, rotationId, report.lockLost, held, deps, audit);
    // A runner that lost its lock records nothing either (the new holder's bookkeeping stays).
    return outcome(
      { result: 'failed', step: 'store', errorCode: 'KR_LOCK_LOST', detail: summary },
      { degraded: true, ...exposure },
    );
  }
  // A fallback holds no lock of this key: its copy was written without a fence (store.ts).
  const unfenced = report.stored
    .filter((copy) => copy.role === 'fallback')
    .map((copy) => `${copy.destination.backendName}:${copy.destination.target.path}`);
  const { severity, summary, nextAction, unusable } = describeStoreFailure(key, report, {
    failedPlaces,
    held,
    unfenced,
    storedKeyId,
    activeSlot,
  });
  if (unusable) audit.emit('key.unusable', { step: 'store', failed: failedPlaces });
  audit.emit('key.failed', {
    step: 'store',
    errorCode: firstCode,
    nextAction,
    degraded: true,
    ...(unfenced.length > 0 ? { unfenced } : {}),
  });
  await sendAlert(deps, key, {
    severity,
    summary,
    rotationId,
    step: 'store',
    ...typedCode(firstCode),
    nextAction,
    ...(unfenced.length > 0 ? { details: { unfenced } } : {}),
  });
  await recordStoredCopies(report, { rotationId, rotatedAt, storedKeyId, firstCode }, deps);
  return outcome(
    { result: 'failed', step: 'store', errorCode: catalogueCode(firstCode), detail: summary },
    { degraded: true, ...exposure },
  );
}

/** Invariant 9: another runner holds the key now; this one wrote nothing after the refusal. Returns the summary. */
async function reportLockLost(
  key: KeyPolicy,
  rotationId: string,
  lockLost: NonNullable<StoreReport['lockLost']>,
  held: readonly string[],
  deps: RotationDeps,
  audit: AuditLog,
): Promise<string> {
  const { destination } = lockLost;
  const before = held.length > 0 ? `; it had been stored at ${held.join(', ')} before that` : '';
  const summary = `key ${key.id} (${key.organizationId}): this runner lost the key lock before its write to ${destination.backendName}:${destination.target.path} (another runner took the key over); the backend refused the write and nothing more was written, to no destination, fallback or escrow${before}`;
  const nextAction =
    "the runner that holds the lock now finds this rotation's intent marker, probes the stored secret and re-rolls the key if this roll killed it; run `keyroll status` after the next run to see the marker cleared";
  audit.emit('key.failed', { step: 'store', errorCode: 'KR_LOCK_LOST', nextAction, degraded: true });
  await sendAlert(deps, key, {
    severity: 'critical',
    summary,
    rotationId,
    step: 'store',
    errorCode: 'KR_LOCK_LOST',
    nextAction,
  });
  return summary;
}

interface StoreFailureWords {
  severity: 'critical' | 'error';
  summary: string;
  nextAction: string;
  /** Stored nowhere and escrowed nowhere: the key is dead until the next run re-rolls it. */
  unusable: boolean;
}

/** What the alert says, by where the secret ended up (invariant 4: never lost silently). */
function describeStoreFailure(
  key: KeyPolicy,
  report: StoreReport,
  places: {
    failedPlaces: readonly string[];
    held: readonly string[];
    unfenced: readonly string[];
    storedKeyId: string;
    activeSlot: string | undefined;
  },
): StoreFailureWords {
  const { failedPlaces, held, unfenced, storedKeyId, activeSlot } = places;
  const escrowPath = report.escrow && 'path' in report.escrow ? report.escrow.path : undefined;
  if (activeSlot !== undefined && !report.primaryStored) {
    return {
      severity: 'error',
      summary: `key ${key.id} (${key.organizationId}): the new secret of the standby slot ${storedKeyId} was not stored (${failedPlaces.join(', ')}); consumers keep using the active slot ${activeSlot}, whose secret still works`,
      nextAction: `nothing consumers use died; the next rotation rolls ${storedKeyId} again once the destination is back`,
      unusable: false,
    };
  }
  if (held.length === 0 && !escrowPath) {
    return {
      severity: 'critical',
      summary: `key ${key.id} (${key.organizationId}) is UNUSABLE: it was rolled but the new secret could not be stored anywhere (${failedPlaces.join(', ')})`,
      nextAction:
        'the old secret is dead and the new one is lost; the next run re-rolls the key (run `keyroll rotate --key ' +
        key.id +
        ' --reason manual` once the destination is back)',
      unusable: true,
    };
  }
  if (held.length === 0 && escrowPath) {
    return {
      severity: 'critical',
      summary: `key ${key.id} (${key.organizationId}): no destination took the new secret (${failedPlaces.join(', ')}); it is sealed in escrow at ${escrowPath}`,
      nextAction:
        'consumers read a dead secret: recover it with `age -d -i <identity> ' +
        escrowPath +
        '`, or let the next run re-roll the key',
      unusable: false,
    };
  }
  const unfencedNote =
    unfenced.length > 0
      ? ` (the fallback copy was written without a lock fence: a fallback holds no lock of this key, so if another runner rotates the key meanwhile that copy is stale)`
      : '';
  return {
    severity: 'critical',
    summary: `key ${key.id} (${key.organizationId}): destination(s) ${failedPlaces.join(', ')} did not take the new secret; it is stored at ${held.join(', ')}${unfencedNote}`,
    nextAction: report.primaryStored
      ? 'the failed destinations hold a dead secret; the next run copies the working secret to them'
      : 'the primary destination holds a dead secret; the next run re-rolls the key (or copy it from ' +
        held.join(', ') +
        ')',
    unusable: false,
  };
}

/**
 * Copies that landed are real rotations: recording them keeps the next run from rotating the key
 * again once it has repaired the failed destinations. The primary also records the failure.
 */
async function recordStoredCopies(
  report: StoreReport,
  record: { rotationId: string; rotatedAt: string; storedKeyId: string; firstCode: string },
  deps: RotationDeps,
): Promise<void> {
  const { rotationId, rotatedAt, storedKeyId, firstCode } = record;
  for (const copy of report.stored) {
    try {
      await copy.destination.backend.recordRotation(copy.destination.target, {
        rotationId,
        rotatedAt,
        version: copy.version,
        keyId: storedKeyId,
      });
    } catch {
      // Best effort: the intent marker left behind makes the next run look at this key anyway.
    }
  }
  const primary = report.stored.find((copy) => copy.role === 'destination');
  if (primary) {
    await recordFailureBestEffort(primary.destination, {
      rotationId,
      step: 'store',
      errorCode: firstCode,
      at: deps.now().toISOString(),
    });
  }
}
