// Steps 7 and 8 of a rotation: verify what was stored (read back, the API accepts the new
// secret, and for a two-slot entry the previous active secret still works: invariant 10), then
// finish (record the rotation and the active key, clear the marker: invariant 6). Recording is
// idempotent, so a retried finish changes nothing; a failed verify leaves the marker so the next
// run probes and repairs.
import type { Secret } from '../audit/public/secret.ts';
import { catalogueCode, errorCode, typedCode } from '../errors.ts';
import { activeStreak } from './failure-streak.ts';
import { RotationStepError } from './errors.ts';
import { lockLostAfterStore, type Stored } from './step-roll.ts';
import { sendAlert } from './key-alert.ts';
import { reportLeakRecovered } from './leak-recovery.ts';
import { storedVersions } from './tell-stored.ts';
import type { Transaction } from './transaction.ts';
import type { KeyOutcome } from './types.ts';
import { verifyStored, type VerifyFailure, type VerifyReport } from './verify.ts';

export async function verifyAndFinish(
  tx: Transaction,
  stored: Stored,
  keptAlive: Secret | undefined,
): Promise<KeyOutcome> {
  const { key, deps, audit, progress, rotationId } = tx;
  const { rolled, report, rotatedAt, exposureMs } = stored;
  await tx.enter('verify');
  const verified = await verifyStored(key, rolled.secret, report.stored, deps);
  const previous = keptAlive === undefined ? undefined : await previousStillWorks(tx, keptAlive);
  if (verified.failures.length === 0) {
    audit.emit('key.verified', {
      step: 'verify',
      readBack: key.verify.readBack,
      apiCall: verified.apiChecked,
      ...(previous === undefined ? {} : { previousActiveWorks: previous.works }),
    });
  }

  await tx.enter('finish');
  // Invariant 9: the bookkeeping is written only while the lock is provably ours (not taken over,
  // lease not run out because refreshes failed); otherwise the marker stays for the next run.
  if (progress.keeper && (progress.keeper.lost || progress.keeper.remainingMs() <= 0))
    throw lockLostAfterStore(tx);
  const versions = storedVersions(report);
  await recordFinish(tx, stored, verified);

  if (verified.failures.length > 0) {
    audit.emit('key.verify.failed', { step: 'verify', failures: verified.failures });
    const first = verified.failures[0];
    progress.apiRejected = verified.apiRejected;
    throw new RotationStepError(
      'verify',
      key.id,
      first === undefined ? 'KR_VERIFY_FAILED' : catalogueCode(first.errorCode),
      `verification failed: ${describe(verified.failures)}`,
    );
  }

  const slotFacts = key.slots
    ? {
        rolledKeyId: tx.plan.rollKeyId,
        activeKeyId: tx.plan.rollKeyId,
        previousActiveKeyId: tx.plan.activeBefore,
      }
    : {};
  audit.emit('key.succeeded', {
    step: 'finish',
    durationMs: tx.elapsedMs(),
    exposureMs,
    versions,
    rolls: rolled.rolls,
    recovered: progress.recovering,
    ...slotFacts,
  });
  if (previous && !previous.works) await reportPreviousDead(tx, previous.errorCode);
  if (progress.leakRecovery) await reportLeakRecovered(tx, progress.leakRecovery);
  else if (progress.recovering) {
    audit.emit('key.recovered', { step: 'recovery', result: 'rerolled', why: progress.recovering });
    await sendAlert(deps, key, {
      severity: 'warning',
      summary: `keyroll recovered key ${key.id}: a run died mid-rotation and the stored secret no longer worked (${progress.recovering}); the key was re-rolled`,
      rotationId,
      step: 'recovery',
      errorCode: 'KR_RECOVERED_REROLL',
      nextAction: 'nothing to do: the new secret is stored and verified',
    });
  }
  // What the consumers' refresh reads (src/consumers/, invariant 12): when the new value was
  // stored, why, and whether the value consumers held before still works.
  const delivery = {
    rotatedAt,
    reason: tx.trigger.reason,
    ...(previous === undefined ? {} : { previousActiveWorks: previous.works }),
  };
  return tx.outcome(
    {
      result: progress.recovering ? 'recovered' : 'rotated',
      ...(rolled.malformed ? { detail: 'malformed-roll-answer' } : {}),
    },
    { exposureMs, versions, ...delivery },
  );
}

/**
 * Records the rotation at every destination that holds the new secret, the primary last, and
 * clears the intent marker with the primary's record when nothing is left to repair.
 */
async function recordFinish(tx: Transaction, stored: Stored, verified: VerifyReport): Promise<void> {
  const { audit, progress, primary, rotationId } = tx;
  const { report, rotatedAt } = stored;
  // A read-back that did not match, or a new secret the API refuses, leaves the marker: the
  // next run probes and repairs. Otherwise the primary's record (every destination stored, so
  // the primary too) clears it in the same change. The primary is recorded last, so a failure
  // recording another copy still leaves the marker.
  // A marker held for a runner whose lock this rotation took over stays too (invariant 9).
  const clearIntent = verified.readBackOk && !verified.apiRejected && progress.holdUntil === undefined;
  // The primary's record also gives the key lock back when nothing more is written under it: the
  // marker is cleared with it and no failure streak is left to end after it (a backend that can
  // do it in the same change saves the lock's own release: AWS, invariant 11).
  const lastUnderLock =
    clearIntent &&
    verified.failures.length === 0 &&
    tx.stateUnderLock !== undefined &&
    activeStreak(tx.stateUnderLock) === undefined;
  const primaryLast = [...report.stored].sort(
    (a, b) => Number(a.destination === primary) - Number(b.destination === primary),
  );
  for (const copy of primaryLast) {
    const isPrimary = copy.destination === primary;
    const releaseLock = isPrimary && lastUnderLock ? progress.keeper?.lock : undefined;
    // The key whose secret is now stored: for a slot entry, the slot now active (invariant 10).
    await copy.destination.backend.recordRotation(
      copy.destination.target,
      { rotationId, rotatedAt, version: copy.version, keyId: tx.plan.rollKeyId },
      { clearIntent: isPrimary && clearIntent, ...(releaseLock ? { releaseLock } : {}) },
    );
  }
  if (clearIntent) {
    progress.intentSet = false;
    audit.emit('key.intent.cleared', { step: 'finish' });
  }
}

/** Invariant 10: consumers that have not refreshed yet use the previous active secret. */
async function previousStillWorks(
  tx: Transaction,
  secret: Secret,
): Promise<{ works: boolean; errorCode?: string }> {
  try {
    const verdict = await tx.deps.api.probeSecret(secret, { organizationId: tx.key.organizationId });
    return verdict === 'valid' ? { works: true } : { works: false, errorCode: 'KR_VERIFY_PREVIOUS_DEAD' };
  } catch (error) {
    return { works: false, errorCode: errorCode(error) };
  }
}

/** The new secret is fine, but consumers still on the previous one fail: they must refresh now. */
async function reportPreviousDead(tx: Transaction, code: string | undefined): Promise<void> {
  const { key, audit, deps } = tx;
  audit.emit('key.verify.failed', {
    step: 'verify',
    failures: [{ check: 'previous-active', errorCode: code ?? 'KR_VERIFY_PREVIOUS_DEAD' }],
  });
  await sendAlert(deps, key, {
    severity: 'error',
    summary: `keyroll rotated key ${key.id}: the new secret of ${tx.plan.rollKeyId} is stored and works, but the previous active secret (${tx.plan.activeBefore ?? 'unknown'}) no longer works, so consumers that have not refreshed fail until they do`,
    rotationId: tx.rotationId,
    step: 'verify',
    ...typedCode(code ?? 'KR_VERIFY_PREVIOUS_DEAD'),
    nextAction: `make consumers refresh now; check who rolled ${tx.plan.activeBefore ?? 'the previous slot'} outside keyroll (dashboard, another tool)`,
  });
}

function describe(failures: readonly VerifyFailure[]): string {
  return failures
    .map((f) => `${f.check}${f.backend ? ` ${f.backend}:${f.path ?? ''}` : ''} ${f.errorCode}`)
    .join('; ');
}
