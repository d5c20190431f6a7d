// createSecret: the rotation engine's steps 1 to 6 (preflight, lock, decide, intent, roll, store),
// with the store going to AWSPENDING under the event's token (pending-destination.ts); the lock and
// the intent marker stay for finishSecret. Safe to repeat, as AWS retries every step:
// - the token's version already has a value: found, nothing rolled again;
// - this rotation's intent marker is there but no value (a put lost, a Lambda timed out between
//   the roll and the put): never rolled again; the stored secret is probed as `run` recovers, and
//   the step fails with what to do.
// Every failure leaves no AWSPENDING that would block the next rotation ("A previous rotation isn't
// complete"), except where the rolled value lives only there (an active slot rolled to heal a dead
// stored secret): then the critical alert says how to finish that rotation.
import { errorCode } from '../errors.ts';
import { RotationStepError } from '../rotation/errors.ts';
import { failureMeaning } from '../rotation/failure.ts';
import { releaseKeptKeyLock } from '../rotation/key-lock.ts';
import { preflightDestinations } from '../rotation/preflight.ts';
import { sendAlert } from '../rotation/key-alert.ts';
import { decideUnderLock, takeLock } from '../rotation/step-decide.ts';
import { isStored, prepareRoll, rollAndStore } from '../rotation/step-roll.ts';
import { Transaction } from '../rotation/transaction.ts';
import { readTrustedState } from '../rotation/trusted-state.ts';
import type { ResolvedDestination } from '../rotation/types.ts';
import { AWS_CURRENT } from '../backends/aws/pending.ts';
import type { NativeContext } from './context.ts';
import { NativeRotationError, reportedErrors } from './errors.ts';
import { pendingDestinationBackend } from '../backends/aws/pending-destination.ts';
import { dropPending, finishCommand } from './pending-cleanup.ts';

export type CreateOutcome = 'rolled' | 'found-pending' | 'already-current';

export async function createSecret(ctx: NativeContext): Promise<CreateOutcome> {
  const { key, primary, native, token, deps, audit } = ctx;
  const view = await native.describe(primary.target.path);
  const done = (did: CreateOutcome): CreateOutcome => {
    audit.emit('key.native.step', { step: 'createSecret', did, version: token });
    return did;
  };
  if (view.versions[token]?.includes(AWS_CURRENT) === true) return done('already-current');
  // A repeat: the value is there, so the roll happened and was stored; never roll again.
  if ((await native.readVersion(primary.target, token)) !== undefined) return done('found-pending');
  const state = await readTrustedState(primary, key, deps.now());
  if (state.intent?.rotationId === token) await valueLost(ctx);

  const pending: ResolvedDestination = { ...primary, backend: pendingDestinationBackend(primary.backend, native, token) };
  // AWS's schedule decided the key is due; the minimum interval and consumerRefresh still hold (invariants 5 and 10).
  const tx = new Transaction({ key, destinations: [pending], fallbacks: ctx.fallbacks, trigger: { reason: 'scheduled', force: false, ignoreSchedule: true }, rotationId: token }, deps);
  const { progress } = tx;
  let keepLock = false;
  try {
    await deps.checkpoint?.('preflight');
    await preflightDestinations(key, tx.destinations, tx.fallbacks, tx.audit);
    const busy = await takeLock(tx);
    if (busy) throw new NativeRotationError('KR_NATIVE_NOT_ROLLED', `key ${key.id}: another runner holds the key lock; nothing was rolled and AWS retries the step`);
    const decided = await decideUnderLock(tx);
    if (decided) {
      throw new NativeRotationError('KR_NATIVE_NOT_ROLLED', `key ${key.id}: not rolled (${decided.detail ?? decided.result}); nothing changed, the next scheduled rotation tries again`);
    }
    const { sealToEscrow } = await prepareRoll(tx);
    const stored = await rollAndStore(tx, sealToEscrow);
    if (!isStored(stored)) {
      // The engine audited key.failed and alerted where the value went (a fallback, the escrow, or
      // nowhere): that is this failure's one alert (invariant 7), not reported again below.
      const failed = new RotationStepError('store', key.id, stored.errorCode ?? 'KR_STORE_FAILED', `key ${key.id}: the rolled value of ${tx.plan.rollKeyId} could not be put as AWSPENDING (${stored.detail ?? 'store failed'})`);
      reportedErrors.add(failed);
      throw failed;
    }
    // finishSecret moves AWSCURRENT under this same lock (owner and rotation from the token).
    keepLock = true;
    audit.emit('key.native.step', { step: 'createSecret', did: 'rolled', version: token, rolledKeyId: tx.plan.rollKeyId });
    return 'rolled';
  } catch (error) {
    const step = error instanceof RotationStepError ? error.step : progress.step;
    const code = errorCode(error);
    const rolled = progress.rolled || progress.mayHaveRolled;
    if (!rolled && progress.intentSet && progress.holdUntil === undefined) {
      await primary.backend.clearIntent(primary.target, token).catch(() => undefined);
      progress.intentSet = false;
    }
    // A value at the token's version is the rolled one; where it is the only copy of the key consumers
    // need (the active slot was rolled), AWSPENDING keeps it and the alert says how to finish.
    const onlyCopy = progress.stored && tx.plan.keepsAlive === undefined;
    if (!onlyCopy) await dropPending(ctx, 'createSecret');
    if (error instanceof NativeRotationError) audit.emit('key.native.step', { step: 'createSecret', did: 'not-rolled', version: token, errorCode: code });
    // Invariant 7: audited and alerted like any rotation's failure (the failure streak included), once.
    if (!(error instanceof Error && reportedErrors.has(error))) {
      const meaning = failureMeaning({ ...progress, step, mayHaveRolled: rolled && !progress.rolled, standby: tx.plan.keepsAlive !== undefined && progress.recovering === undefined });
      await tx.reportFailure(error, step, code, meaning);
      if (error instanceof Error) reportedErrors.add(error);
    }
    if (onlyCopy) {
      await sendAlert(deps, key, {
        severity: 'critical',
        summary: `key ${key.id}: the rolled value of ${tx.plan.rollKeyId} is stored only as AWSPENDING (version ${token}) of ${primary.target.path}`,
        rotationId: token,
        step,
        errorCode: code,
        nextAction: finishCommand(ctx),
      });
    }
    throw error;
  } finally {
    tx.endStep();
    if (progress.keeper) {
      if (keepLock) progress.keeper.stop();
      else await releaseKeptKeyLock(progress.keeper).catch(() => undefined);
    }
  }
}

/**
 * This rotation's marker but no value at its version: the roll may have happened and its put never
 * landed. Not rolled again for this token; the stored secret is probed as `run`'s recovery does.
 */
async function valueLost(ctx: NativeContext): Promise<never> {
  const { key, primary, deps, audit, token } = ctx;
  const stored = await primary.backend.readSecret(primary.target).catch(() => undefined);
  const verdict = stored === undefined ? 'invalid' : await deps.api.probeSecret(stored.secret, { organizationId: key.organizationId }).catch(() => 'unknown' as const);
  audit.emit('key.probe', { step: 'recovery', verdict: verdict === 'valid' ? 'stored-secret-works' : verdict === 'invalid' ? 'stored-secret-dead' : 'probe-failed' });
  await dropPending(ctx, 'createSecret');
  const works = verdict === 'valid';
  const nextAction = works
    ? 'AWSCURRENT still works (only the standby was rolled, and nobody holds its lost value); the intent marker stays and the next rotation repairs it and rolls the standby again'
    : `AWSCURRENT may no longer work: run \`keyroll rotate --key ${key.id} --reason recovery\` now (it re-rolls and stores the key directly)`;
  await sendAlert(deps, key, { severity: works ? 'error' : 'critical', summary: `key ${key.id}: a repeated createSecret found this rotation's intent marker but no value at version ${token}; it is not rolled again`, rotationId: token, step: 'recovery', errorCode: 'KR_NATIVE_VALUE_LOST', nextAction });
  throw new NativeRotationError('KR_NATIVE_VALUE_LOST', `key ${key.id}: the value of rotation ${token} was never stored; not rolled again. ${nextAction}`);
}
