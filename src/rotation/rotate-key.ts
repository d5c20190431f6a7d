// The rotation of one key as its named steps (docs/design.md, "The rotation of one key"), in order:
//   1 preflight → 2 lock → 3 decide under the lock (recovery) → 4 intent → 5 roll → 6 store →
//   7 verify → 8 finish. A single key's consumers are told between 6 and 7 (tell-stored.ts).
// Each step lives in its own file and says which invariant it serves; a two-slot entry differs
// only in which key is rolled (slots.ts), what is recorded as active, and the extra probe of the
// previous active secret at verify (invariant 10).
//
// The sequence is written once, here. The AWS rotation function's createSecret runs the same steps
// 1 to 6 (rotateKeyUntilStored): it stops after the store and keeps the key lock for finishSecret,
// which verifies and finishes under it (src/lambda/). STYLE.md rule 11: an entry point takes an
// option of this sequence; it never re-states the steps with their catch and finally.
import type { AuditLog } from '../audit/public/events.ts';
import { withSecretScope } from '../audit/public/sanitize.ts';
import { catalogueCode, errorCode, errorMessage } from '../errors.ts';
import type { DueReason } from '../policy/public/due.ts';
import { deferAlerts } from './deferred-alerts.ts';
import { RotationStepError, RunAbortedError } from './errors.ts';
import { failureMeaning } from './failure.ts';
import { releaseKeptKeyLock } from './key-lock.ts';
import { preflightDestinations } from './preflight.ts';
import { releaseBudget } from './write-budget.ts';
import { decideUnderLock, takeLock } from './step-decide.ts';
import { verifyAndFinish } from './step-finish.ts';
import { isStored, prepareRoll, rollAndStore } from './step-roll.ts';
import { tellStored } from './tell-stored.ts';
import { Transaction, type TransactionInput, type TransactionProgress } from './transaction.ts';
import type { KeyOutcome, ResolvedDestination, RotationDeps } from './types.ts';

export interface RotateKeyInput extends TransactionInput {
  /** Why the caller found the key due (from the state it read before the lock). */
  reasons: DueReason[];
  /** Shutdown: stops before the roll; never between roll and store. */
  signal?: AbortSignal;
  /** Pre-assigned rotation id (the daemon's trigger answers with it before the rotation ends). */
  rotationId?: string;
}

export async function rotateKey(input: RotateKeyInput, deps: RotationDeps): Promise<KeyOutcome> {
  // Alerts and success notices go out after the key lock is released: a slow or hostile sink
  // must never keep a lock held (and every other runner waiting) for as long as it likes.
  // The rolled secret is known to the sanitizer for this rotation only (its alerts included):
  // nothing keeps a trace of it in memory once the rotation is over.
  return withSecretScope(async () => {
    const deferred = deferAlerts(deps);
    try {
      return await rotateKeyUnderLock(input, deferred.deps);
    } finally {
      await deferred.flush();
    }
  });
}

/**
 * Where a caller ends the sequence early: after the store (step 6), the intent marker and the key
 * lock left for the caller's later step, which verifies, records and gives the lock back under the
 * same owner and rotation id (the rotation function: createSecret, then finishSecret).
 */
export interface StopAfterStore {
  /**
   * The error this caller fails with when the sequence ends without a stored value: another
   * runner's lock, a skip or a repair under the lock (each then reported as this key's failed
   * step), or a store that failed (already audited and alerted by the store, store-outcome.ts).
   */
  failWith(outcome: KeyOutcome): Error;
  /** Any failure, still under the lock and before it is reported: the caller's own clean-up. */
  onFailure(error: unknown): Promise<void>;
}

/** A rotation stopped after its store (StopAfterStore): the key or slot it rolled. */
export interface StoredUnderLock {
  rolledKeyId: string;
}

/**
 * Steps 1 to 6 of rotateKey, then a stop with the lock kept (StopAfterStore). Every error it throws
 * was audited and alerted as this key's failed step, once (invariant 7). The caller holds the secret
 * scope and defers alerts past its end (the rotation function's handler does both).
 */
export function rotateKeyUntilStored(
  input: RotateKeyInput,
  stop: StopAfterStore,
  deps: RotationDeps,
): Promise<StoredUnderLock> {
  return rotateKeyUnderLock(input, deps, stop);
}

async function rotateKeyUnderLock(input: RotateKeyInput, deps: RotationDeps): Promise<KeyOutcome>;
async function rotateKeyUnderLock(
  input: RotateKeyInput,
  deps: RotationDeps,
  stop: StopAfterStore,
): Promise<StoredUnderLock>;
// eslint-disable-next-line max-lines-per-function -- the rotation's steps 1-8 and their one catch, read top to bottom
async function rotateKeyUnderLock(
  input: RotateKeyInput,
  deps: RotationDeps,
  stop?: StopAfterStore,
): Promise<KeyOutcome | StoredUnderLock> {
  const tx = new Transaction(input, deps);
  const { key, primary, progress, audit, rotationId } = tx;
  // A failure the store already audited and alerted (a stop after a failed store) is not reported twice.
  let reported = false;
  // A stop after the store keeps the lock for the caller's later step.
  let keepLock = false;
  try {
    // 1. Invariant 1: every destination proves it can be written before anything is rolled.
    await deps.checkpoint?.('preflight');
    await preflightDestinations(key, tx.destinations, tx.fallbacks, audit);
    // 2. Invariants 5 and 9: one roll at a time per key, across every runner.
    const busy = await takeLock(tx);
    if (busy) {
      if (stop) throw stop.failWith(busy);
      return busy;
    }
    // 3. Invariant 6: under the lock, decide again (rotated meanwhile? died mid-way?).
    const decided = await decideUnderLock(tx);
    if (decided) {
      // Still under the lock: the caller's failure is reported (and its streak written) here.
      if (stop) throw stop.failWith(decided);
      await tx.endFailureStreak(decided);
      return decided;
    }
    // 4. Invariants 2, 6 and 9: credentials, the lock proven, the marker.
    const { sealToEscrow, keptAlive } = await prepareRoll(tx);
    // 5 and 6. The roll, then the store and nothing else (invariants 2, 4, 8 and 9).
    const stored = await rollAndStore(tx, sealToEscrow);
    if (!isStored(stored)) {
      if (!stop) return stored;
      reported = true;
      throw stop.failWith(stored);
    }
    if (stop) {
      keepLock = true;
      return { rolledKeyId: tx.plan.rollKeyId };
    }
    // Invariant 12: a single key's consumers hear of the stored value now, not after verify.
    tellStored(tx, stored);
    // 7 and 8. Verify and finish (invariants 6 and 10).
    const finished = await verifyAndFinish(tx, stored, keptAlive);
    // Still under the lock: a success ends the failure streak (and lifts a quarantine).
    await tx.endFailureStreak(finished);
    return finished;
  } catch (error) {
    const step = error instanceof RotationStepError ? error.step : progress.step;
    const code = errorCode(error);
    // An attempt that may have rolled keeps the intent marker whatever came after (invariant 6).
    const keepIntent = progress.rolled || progress.mayHaveRolled;
    if (!keepIntent) await cleanUpUnrolled(progress, primary, rotationId, audit);
    await stop?.onFailure(error);
    const meaning = failureMeaning({
      ...progress,
      step,
      mayHaveRolled: keepIntent && !progress.rolled,
      standby: tx.plan.keepsAlive !== undefined && progress.recovering === undefined,
    });
    // A stop after the store serves one key (the rotation function): there is no run to stop, so
    // an abort is that key's failure like any other.
    if (error instanceof RunAbortedError && !stop) {
      // The run stops; a key left possibly dead still gets its own critical alert.
      if (keepIntent) await tx.reportFailure(error, step, code, meaning);
      throw error;
    }
    if (!reported) await tx.reportFailure(error, step, code, meaning);
    if (stop) throw error;
    return tx.outcome({
      result: 'failed',
      step,
      errorCode: catalogueCode(code),
      detail: errorMessage(error),
    });
  } finally {
    tx.endStep();
    releaseBudget(progress.writeBudget);
    if (keepLock) progress.keeper?.stop();
    else if (progress.keeper) {
      // The destinations' locks, the last taken first; the primary's last (key-lock.ts).
      const released = await releaseKeptKeyLock(progress.keeper, (destination, error) => {
        // The lock expires by its TTL; the next runner takes it over then.
        audit.emit('key.failed', {
          step: 'finish',
          errorCode: errorCode(error),
          nextAction: 'the lock expires by its TTL',
          ...(destination === primary
            ? {}
            : { backend: destination.backendName, path: destination.target.path }),
        });
      });
      if (released === true) audit.emit('key.lock.released', { step: 'finish' });
    }
  }
}

/** Nothing was rolled: the marker and lock would only confuse the next run. */
async function cleanUpUnrolled(
  progress: TransactionProgress,
  primary: ResolvedDestination,
  rotationId: string,
  audit: AuditLog,
): Promise<void> {
  if (!progress.intentSet || progress.rolled) return;
  // A marker held for a runner whose lock this rotation took over stays (invariant 9): that
  // runner may still act, even though this rotation rolled nothing.
  if (progress.holdUntil !== undefined) return;
  try {
    await primary.backend.clearIntent(primary.target, rotationId);
    progress.intentSet = false;
    audit.emit('key.intent.cleared', { step: progress.step });
  } catch {
    // A marker left behind is handled by the next run's recovery; nothing more to do here.
  }
}
