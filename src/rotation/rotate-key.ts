// The rotation of one key as named steps (DESIGN.md):
// preflight → lock → intent → roll → store → verify → finish.
// Each step that exists for safety says which invariant it serves.
import type { AuditLog } from '../audit/events.ts';
import { withSecretScope } from '../audit/sanitize.ts';
import type { KeyState } from '../backends/types.ts';
import { errorCode, errorMessage } from '../errors.ts';
import { decideDue, type DueReason } from '../policy/due.ts';
import type { KeyPolicy } from '../policy/schema.ts';
import { RotationStepError, RunAbortedError } from './errors.ts';
import { failureMeaning, type FailureMeaning } from './failure.ts';
import { LockKeeper } from './lock-keeper.ts';
import { markerMayStillBeActedOn, recoverLeftoverIntent } from './recovery.ts';
import { rollWithRetries, type AttemptGuard, type RollProgress, type RollSuccess } from './roll.ts';
import { storeSecret } from './store.ts';
import { auditStore, recordFailureBestEffort, sendAlert, storeFailed } from './store-outcome.ts';
import type { KeyOutcome, ResolvedDestination, RotationDeps, RotationStep, RunTrigger } from './types.ts';
import { verifyStored } from './verify.ts';
import { deferAlerts } from './deferred-alerts.ts';
import { ensureFreshCredentials, preflightDestinations } from './preflight.ts';

// age and its elliptic curves take longer to load than the rest of a cold start, and only a
// policy with an escrow can need them: loaded then, in preflight, so a broken install fails
// before the roll, never after a secret was rolled (invariant 4).
let escrowModule: Promise<typeof import('./escrow.ts')> | undefined;
const loadEscrow = (): Promise<typeof import('./escrow.ts')> => (escrowModule ??= import('./escrow.ts'));

export interface RotateKeyInput {
  key: KeyPolicy;
  destinations: ResolvedDestination[];
  fallbacks: ResolvedDestination[];
  trigger: RunTrigger;
  /** Why the caller found the key due (from the state it read before the lock). */
  reasons: DueReason[];
  /** Shutdown: stops before the roll; never between roll and store. */
  signal?: AbortSignal;
  /** Pre-assigned rotation id (the daemon's trigger answers with it before the rotation ends). */
  rotationId?: string;
}

interface Progress extends RollProgress {
  step: RotationStep;
  /** The API answered a roll with a new secret. */
  rolled: boolean;
  /** The new secret reached every destination. */
  stored: boolean;
  /** Keeps the key lock alive while this rotation works (invariant 9); set once it is taken. */
  keeper?: LockKeeper;
  intentSet: boolean;
  /** This rotation's marker must outlive it: a runner whose lock it took over may still act. */
  holdUntil?: string;
  /** A leftover intent was found and the key is being re-rolled to repair it. */
  recovering?: string;
  /** The API refused the freshly stored secret at verify. */
  apiRejected?: boolean;
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

async function rotateKeyUnderLock(input: RotateKeyInput, deps: RotationDeps): Promise<KeyOutcome> {
  const { key, destinations, fallbacks, trigger } = input;
  const primary = destinations[0];
  if (!primary) throw new Error(`key ${key.id} has no destination`);
  const rotationId = input.rotationId ?? deps.newRotationId();
  const audit = deps.audit.child({ rotationId, keyId: key.id, organizationId: key.organizationId });
  const startedMs = deps.monotonicMs();
  const progress: Progress = { step: 'preflight', rolled: false, stored: false, rolls: 0, mayHaveRolled: false, verdicts: [], intentSet: false };
  let stepStartedMs = startedMs;
  const endStep = (): void => {
    const nowMs = deps.monotonicMs();
    deps.observer?.stepDuration(progress.step, nowMs - stepStartedMs);
    stepStartedMs = nowMs;
  };
  /** Moves to the next step: times the previous one, then gives crash tests their pause point. */
  const enter = async (step: RotationStep): Promise<void> => {
    endStep();
    progress.step = step;
    await deps.checkpoint?.(step);
  };
  const outcome = (result: KeyOutcome['result'], extra: Partial<KeyOutcome> = {}): KeyOutcome => ({
    keyId: key.id,
    organizationId: key.organizationId,
    result,
    rotationId,
    durationMs: Math.round(deps.monotonicMs() - startedMs),
    rolls: progress.rolls,
    ...extra,
  });

  const reportFailure = async (error: unknown, step: RotationStep, code: string, meaning: FailureMeaning): Promise<void> => {
    const probes = progress.verdicts.length > 0 ? ` (probes after unanswered rolls: ${progress.verdicts.join(', ')})` : '';
    audit.emit('key.failed', { step, errorCode: code, error: errorMessage(error), nextAction: meaning.nextAction, ...(progress.verdicts.length > 0 ? { verdicts: progress.verdicts } : {}) });
    // Bookkeeping only under the lock: without it, a write could erase another runner's intent.
    if (progress.keeper && !progress.keeper.lost) await recordFailureBestEffort(primary, { rotationId, step, errorCode: code, at: deps.now().toISOString() });
    await sendAlert(deps, key, {
      severity: meaning.severity,
      summary: `keyroll could not rotate key ${key.id} (${key.organizationId}) at step ${step}: ${errorMessage(error)}${probes}`,
      rotationId,
      step,
      errorCode: code,
      nextAction: meaning.nextAction,
    });
  };

  try {
    // Invariant 1: every destination proves it can be written before anything is rolled.
    await deps.checkpoint?.('preflight');
    await preflightDestinations(key, destinations, fallbacks, audit);
    const sealToEscrow = deps.escrow ? (await loadEscrow()).sealToEscrow : undefined;

    // Invariant 5: one roll at a time per key, across every runner.
    await enter('lock');
    const takenAtMs = deps.monotonicMs();
    const locked = await primary.backend.acquireLock(primary.target, { owner: deps.owner, rotationId, ttlMs: key.lockTtlMs, clockSkewMs: key.clockSkewMs });
    if (!locked.acquired) {
      audit.emit('key.lock.busy', { step: 'lock', holder: locked.holder.owner, holderRotationId: locked.holder.rotationId, expiresAt: locked.holder.expiresAt });
      return outcome('busy', { detail: 'lock-busy' });
    }
    // Invariant 9: the lock stays alive in the background until the rotation lets it go.
    const keeper = new LockKeeper({
      key,
      primary,
      lock: locked.lock,
      takenAtMs,
      monotonicMs: deps.monotonicMs,
      onLost: () => { audit.emit('key.lock.lost', { step: progress.step }); },
    });
    progress.keeper = keeper;
    keeper.start();
    audit.emit('key.lock.acquired', { step: 'lock', tookOver: locked.lock.tookOver, expiresAt: locked.lock.expiresAt });

    // Under the lock, decide again: another runner may have just rotated the key or died mid-way.
    const state = await primary.backend.readState(primary.target);
    if (state.intent && state.intent.rotationId !== rotationId) {
      const leftover = state.intent;
      const verdict = await recoverLeftoverIntent(key, leftover, destinations, deps, audit, { tookOver: locked.lock.tookOver });
      // Invariant 9: the runner that left the marker may still act (a roll in flight that lands
      // after ours would kill what we store), so this rotation's own marker outlives it.
      if (markerMayStillBeActedOn(leftover, locked.lock.tookOver, deps.now()) !== undefined) {
        progress.holdUntil = laterOf(leftover.holdUntil, new Date(deps.now().getTime() + key.lockTtlMs).toISOString());
      }
      if (verdict.kind === 'stored-secret-works' && verdict.kept !== undefined) {
        const rotateAnyway = trigger.force || (trigger.ignoreSchedule === true && !withinMinInterval(key, state.lastRotatedAt, deps.now()));
        if (!rotateAnyway && !stillDue(key, state, deps.now())) {
          // The next run, with nobody's lock to take over, clears the marker and alerts then.
          audit.emit('key.skipped', { step: 'lock', why: 'intent-kept', lastRotatedAt: state.lastRotatedAt });
          return outcome('skipped', { detail: 'intent-kept' });
        }
        // This rotation replaces the marker (with its own, held): the interrupted one is reported now.
        await sendAlert(deps, key, {
          severity: 'warning',
          summary: `keyroll took over key ${key.id} from a run that stopped or stalled mid-rotation; the stored secret still works`,
          rotationId,
          step: 'recovery',
          errorCode: 'KR_RECOVERED_INTENT',
          nextAction: `rotating now; the intent marker stays until ${progress.holdUntil ?? 'later'} in case the stalled run still acts, and later runs probe the stored secret`,
        });
      } else if (verdict.kind === 'stored-secret-works') {
        if (verdict.failed.length > 0) {
          throw new RotationStepError('recovery', key.id, 'KR_RECOVERY_REPAIR_FAILED', `the stored secret works, but copying it to ${verdict.failed.join(', ')} failed; those destinations hold a stale or dead secret`);
        }
        // A marker a finished rotation kept on purpose (holdUntil, after a takeover) whose secret
        // works: nothing died, so it is cleared without a recovery alert.
        const heldAndDone = leftover.holdUntil !== undefined && verdict.completed !== undefined && verdict.repaired.length === 0;
        if (!heldAndDone) {
          audit.emit('key.recovered', { step: 'recovery', result: 'stored-secret-works', repaired: verdict.repaired, completedRotationId: verdict.completed?.rotationId });
          await sendAlert(deps, key, {
            severity: 'warning',
            summary: `keyroll recovered key ${key.id}: a run died mid-rotation; the stored secret still works`,
            rotationId,
            step: 'recovery',
            errorCode: 'KR_RECOVERED_INTENT',
            nextAction: verdict.repaired.length > 0 ? `copied the working secret to ${verdict.repaired.join(', ')}` : 'nothing to do',
          });
        }
        const lastRotatedAt = verdict.completed?.rotatedAt ?? state.lastRotatedAt;
        const rotateAnyway = trigger.force || (trigger.ignoreSchedule === true && !withinMinInterval(key, lastRotatedAt, deps.now()));
        if (!rotateAnyway && !stillDue(key, { exists: state.exists, ...(lastRotatedAt ? { lastRotatedAt } : {}) }, deps.now())) {
          if (!heldAndDone) return outcome('recovered', { detail: 'stored-secret-works' });
          audit.emit('key.skipped', { step: 'lock', why: 'already-rotated', lastRotatedAt });
          return outcome('skipped', { detail: 'already-rotated' });
        }
      } else {
        // The stored secret is dead, missing or unprobeable: until the re-roll is stored the key
        // may be unusable, so a failure from here on keeps the marker and alerts critical.
        progress.recovering = verdict.why;
        progress.mayHaveRolled = true;
      }
    } else if (!trigger.force) {
      const skip = skipReason(key, state, deps.now(), trigger.ignoreSchedule === true);
      if (skip) {
        audit.emit('key.skipped', { step: 'lock', why: skip, lastRotatedAt: state.lastRotatedAt });
        return outcome('skipped', { detail: skip });
      }
    }

    // Invariant 2: credentials are renewed now, so no token renewal or login can land between
    // the roll answer and the write.
    await ensureFreshCredentials(key, [...destinations, ...fallbacks]);

    // Invariant 5 before invariant 6: a lock that a long preflight or recovery let expire may
    // have been taken over, and the new holder may have set its own marker. Checking (and
    // renewing) the lock first means this rotation never overwrites that marker, and never
    // clears it afterwards as its own when the lost lock stops it.
    if (keeper.remainingMs() < key.lockTtlMs / 2) await keeper.refresh();
    keeper.assertHeld('lock');

    // Invariant 6: the intent marker is durable before the roll, so a crash after it is found.
    await enter('intent');
    await primary.backend.setIntent(primary.target, {
      rotationId,
      keyId: key.id,
      owner: deps.owner,
      startedAt: deps.now().toISOString(),
      ...(progress.holdUntil === undefined ? {} : { holdUntil: progress.holdUntil }),
    });
    progress.intentSet = true;
    audit.emit('key.intent.set', { step: 'intent' });

    endStep();
    progress.step = 'roll';
    // The key's audit, so the roll step's probe and retry events carry the key and rotation ids.
    // Invariant 9: each attempt proves the lock first and holds background refreshes until the
    // store is done, so nothing but the write follows the roll answer (invariant 2).
    const leaseMs = deps.leaseNeededMs?.(key) ?? 0;
    const guard: AttemptGuard = { before: () => keeper.holdFor(leaseMs, 'roll'), after: () => { keeper.release(); } };
    const rolled: RollSuccess = await rollWithRetries(key, primary, { ...deps, audit }, progress, input.signal, guard);
    const answeredAtMs = deps.monotonicMs();
    const rotatedAt = deps.now().toISOString();
    progress.rolled = true;

    // Invariant 2: nothing but the backend writes between the roll answer and the store.
    progress.step = 'store';
    const report = await storeSecret(
      { secret: rolled.secret, keyId: key.id, organizationId: key.organizationId, rotationId, rotatedAt },
      destinations,
      fallbacks,
      {
        policy: { attempts: key.store.attempts, initialMs: key.store.initialBackoffMs, maxMs: key.store.maxBackoffMs },
        sleep: (ms) => deps.sleep(ms),
        monotonicMs: deps.monotonicMs,
        ...(deps.escrow ? { escrow: deps.escrow } : {}),
        sealToEscrow,
        // Invariant 9: a runner that lost the lock cannot overwrite what the new holder stored.
        fenceFor: (destination) => (destination === primary ? { lock: keeper.lock } : undefined),
      },
    ).finally(() => { keeper.release(); });
    const exposureMs = report.firstDurableAtMs === undefined ? undefined : Math.round(report.firstDurableAtMs - answeredAtMs);
    deps.observer?.stepDuration('roll', answeredAtMs - stepStartedMs);
    stepStartedMs = answeredAtMs;
    auditStore(audit, rolled, report, answeredAtMs);
    if (exposureMs !== undefined) deps.observer?.exposure(exposureMs);
    await deps.checkpoint?.('store');
    if (!report.allDestinationsStored) {
      return await storeFailed(key, rotationId, rotatedAt, report, exposureMs, deps, audit, outcome);
    }
    progress.stored = true;

    await enter('verify');
    const verified = await verifyStored(key, rolled.secret, report.stored, deps);
    if (verified.failures.length === 0) {
      audit.emit('key.verified', { step: 'verify', readBack: key.verify.readBack, apiCall: verified.apiChecked });
    }

    await enter('finish');
    if (keeper.lost) {
      throw new RotationStepError('finish', key.id, 'KR_LOCK_LOST', 'another runner took over the key lock after the new secret was stored; the intent marker stays and the next run probes the stored secret');
    }
    const versions = report.stored.map((copy) => ({ backend: copy.destination.backendName, path: copy.destination.target.path, version: copy.version }));
    // A read-back that did not match, or a new secret the API refuses, leaves the marker: the
    // next run probes and repairs. Otherwise the primary's record (every destination stored, so
    // the primary too) clears it in the same change. The primary is recorded last, so a failure
    // recording another copy still leaves the marker.
    // A marker held for a runner whose lock this rotation took over stays too (invariant 9).
    const clearIntent = verified.readBackOk && !verified.apiRejected && progress.holdUntil === undefined;
    const primaryLast = [...report.stored].sort((a, b) => Number(a.destination === primary) - Number(b.destination === primary));
    for (const copy of primaryLast) {
      const isPrimary = copy.destination === primary;
      await copy.destination.backend.recordRotation(copy.destination.target, { rotationId, rotatedAt, version: copy.version }, { clearIntent: isPrimary && clearIntent });
    }
    if (clearIntent) {
      progress.intentSet = false;
      audit.emit('key.intent.cleared', { step: 'finish' });
    }

    if (verified.failures.length > 0) {
      audit.emit('key.verify.failed', { step: 'verify', failures: verified.failures });
      const first = verified.failures[0];
      progress.apiRejected = verified.apiRejected;
      throw new RotationStepError('verify', key.id, first?.errorCode ?? 'KR_VERIFY_FAILED', `verification failed: ${verified.failures.map((f) => `${f.check}${f.backend ? ` ${f.backend}:${f.path ?? ''}` : ''} ${f.errorCode}`).join('; ')}`);
    }

    audit.emit('key.succeeded', { step: 'finish', durationMs: Math.round(deps.monotonicMs() - startedMs), exposureMs, versions, rolls: rolled.rolls, recovered: progress.recovering });
    if (progress.recovering) {
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
    await notifySuccess(deps, key, { keyId: key.id, organizationId: key.organizationId, rotationId, rotatedAt, destinations: versions });
    return outcome(progress.recovering ? 'recovered' : 'rotated', { exposureMs, versions, ...(rolled.malformed ? { detail: 'malformed-roll-answer' } : {}) });
  } catch (error) {
    const step = error instanceof RotationStepError ? error.step : progress.step;
    const code = errorCode(error);
    // An attempt that may have rolled keeps the intent marker whatever came after (invariant 6).
    const keepIntent = progress.rolled || progress.mayHaveRolled;
    if (!keepIntent) await cleanUpUnrolled(progress, primary, rotationId, audit);
    const meaning = failureMeaning({ ...progress, step, mayHaveRolled: keepIntent && !progress.rolled });
    if (error instanceof RunAbortedError) {
      // The run stops; a key left possibly dead still gets its own critical alert.
      if (keepIntent) await reportFailure(error, step, code, meaning);
      throw error;
    }
    await reportFailure(error, step, code, meaning);
    return outcome('failed', { step, errorCode: code, detail: errorMessage(error) });
  } finally {
    endStep();
    const keeper = progress.keeper;
    keeper?.stop();
    if (keeper && !keeper.lost) {
      try {
        await primary.backend.releaseLock(primary.target, keeper.lock);
        audit.emit('key.lock.released', { step: 'finish' });
      } catch (error) {
        // The lock expires by its TTL; the next runner takes it over then.
        audit.emit('key.failed', { step: 'finish', errorCode: errorCode(error), nextAction: 'the lock expires by its TTL' });
      }
    }
  }
}

function laterOf(a: string | undefined, b: string): string {
  return a !== undefined && Date.parse(a) > Date.parse(b) ? a : b;
}

function withinMinInterval(key: KeyPolicy, lastRotatedAt: string | undefined, now: Date): boolean {
  return lastRotatedAt !== undefined && now.getTime() - Date.parse(lastRotatedAt) < key.minIntervalMs;
}

function stillDue(key: KeyPolicy, state: KeyState, now: Date): boolean {
  return decideDue(key, { ...(state.lastRotatedAt ? { lastRotatedAt: state.lastRotatedAt } : {}) }, now).due;
}

/** Invariant 5: the minimum interval stops rotation loops; a forced run never gets here. */
function skipReason(key: KeyPolicy, state: KeyState, now: Date, ignoreSchedule: boolean): string | undefined {
  if (state.lastRotatedAt) {
    const since = now.getTime() - Date.parse(state.lastRotatedAt);
    if (since < key.minIntervalMs) return 'min-interval';
  }
  if (!ignoreSchedule && !stillDue(key, state, now)) return 'already-rotated';
  return undefined;
}

/** Nothing was rolled: the marker and lock would only confuse the next run. */
async function cleanUpUnrolled(progress: Progress, primary: ResolvedDestination, rotationId: string, audit: AuditLog): Promise<void> {
  if (!progress.intentSet || progress.rolled) return;
  try {
    await primary.backend.clearIntent(primary.target, rotationId);
    progress.intentSet = false;
    audit.emit('key.intent.cleared', { step: progress.step });
  } catch {
    // A marker left behind is handled by the next run's recovery; nothing more to do here.
  }
}

async function notifySuccess(deps: RotationDeps, key: KeyPolicy, notice: Parameters<NonNullable<RotationDeps['notifySuccess']>>[0]): Promise<void> {
  if (!deps.notifySuccess || key.notify.onSuccess.length === 0) return;
  await deps.notifySuccess(notice, key.notify.onSuccess);
}
