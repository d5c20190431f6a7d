// createSecret: the rotation engine's own sequence (rotate-key.ts: rotateKeyUntilStored), steps 1
// to 6 (preflight, lock, decide, intent, roll, store), with the store going to AWSPENDING under the
// event's token (native/pending-destination.ts); the lock and the intent marker stay for finishSecret.
// Safe to repeat, as AWS retries every step:
// - the token's version already has a value: found, nothing rolled again;
// - this rotation's intent marker is there but no value (a put lost, a Lambda timed out between
//   the roll and the put): never rolled again; the stored secret is probed as `run` recovers, and
//   the step fails with what to do.
// Every failure leaves no AWSPENDING that would block the next rotation ("A previous rotation isn't
// complete"): the sequence stops at the put, so a failure never comes after a value stored there.
import { catalogueCode, errorCode } from '../errors.ts';
import { rotateKeyUntilStored, type StopAfterStore } from '../rotation/public/rotate-key.ts';
import { RotationStepError } from '../rotation/public/errors.ts';
import { sendAlert } from '../rotation/public/key-alert.ts';
import { readTrustedState } from '../rotation/public/trusted-state.ts';
import type { KeyOutcome } from '../rotation/public/types.ts';
import { AWS_CURRENT } from '../backends/public/native.ts';
import type { NativeContext } from './context.ts';
import { NativeRotationError, reportedErrors } from './errors.ts';
import { dropPending } from './pending-cleanup.ts';

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

  const pending = { ...primary, backend: native.pendingDestination(primary.backend, token) };
  try {
    // AWS's schedule decided the key is due; the minimum interval and consumerRefresh still hold (invariants 5 and 10).
    // finishSecret moves AWSCURRENT under the lock kept here (owner and rotation from the token).
    const { rolledKeyId } = await rotateKeyUntilStored(
      {
        key,
        destinations: [pending],
        fallbacks: ctx.fallbacks,
        trigger: { reason: 'scheduled', force: false, ignoreSchedule: true },
        reasons: [],
        rotationId: token,
      },
      untilPending(ctx),
      deps,
    );
    audit.emit('key.native.step', { step: 'createSecret', did: 'rolled', version: token, rolledKeyId });
    return 'rolled';
  } catch (error) {
    // The engine audited key.failed and alerted (invariant 7): the handler does not report it again.
    if (error instanceof Error) reportedErrors.add(error);
    throw error;
  }
}

/** How createSecret ends the engine's sequence: after the put as AWSPENDING, the lock kept for finishSecret. */
function untilPending(ctx: NativeContext): StopAfterStore {
  const { key, audit, token } = ctx;
  return {
    failWith: (outcome: KeyOutcome): Error => {
      if (outcome.result === 'busy')
        return new NativeRotationError(
          'KR_NATIVE_NOT_ROLLED',
          `key ${key.id}: another runner holds the key lock; nothing was rolled and AWS retries the step`,
        );
      if (outcome.result === 'skipped' || outcome.result === 'recovered') {
        return new NativeRotationError(
          'KR_NATIVE_NOT_ROLLED',
          `key ${key.id}: not rolled (${outcome.detail ?? outcome.result}); nothing changed, the next scheduled rotation tries again`,
        );
      }
      // The store failed: the engine audited key.failed and alerted where the value went (a
      // fallback, the escrow, or nowhere); that is this failure's one alert.
      return new RotationStepError(
        'store',
        key.id,
        catalogueCode(outcome.errorCode ?? 'KR_STORE_FAILED'),
        `key ${key.id}: the rolled value of ${outcome.rolledKeyId ?? key.id} could not be put as AWSPENDING (${outcome.detail ?? 'store failed'})`,
      );
    },
    // Nothing stored at the token's version is worth keeping: no AWSPENDING may block the next rotation.
    onFailure: async (error: unknown): Promise<void> => {
      await dropPending(ctx, 'createSecret');
      if (error instanceof NativeRotationError)
        audit.emit('key.native.step', {
          step: 'createSecret',
          did: 'not-rolled',
          version: token,
          errorCode: errorCode(error),
        });
    },
  };
}

/**
 * This rotation's marker but no value at its version: the roll may have happened and its put never
 * landed. Not rolled again for this token; the stored secret is probed as `run`'s recovery does.
 */
async function valueLost(ctx: NativeContext): Promise<never> {
  const { key, primary, deps, audit, token } = ctx;
  const stored = await primary.backend.readSecret(primary.target).catch(() => undefined);
  const verdict =
    stored === undefined
      ? 'invalid'
      : await deps.api
          .probeSecret(stored.secret, { organizationId: key.organizationId })
          .catch(() => 'unknown' as const);
  audit.emit('key.probe', {
    step: 'recovery',
    verdict:
      verdict === 'valid'
        ? 'stored-secret-works'
        : verdict === 'invalid'
          ? 'stored-secret-dead'
          : 'probe-failed',
  });
  await dropPending(ctx, 'createSecret');
  const works = verdict === 'valid';
  const nextAction = works
    ? 'AWSCURRENT still works (only the standby was rolled, and nobody holds its lost value); the intent marker stays and the next rotation repairs it and rolls the standby again'
    : `AWSCURRENT may no longer work: run \`keyroll rotate --key ${key.id} --reason recovery\` now (it re-rolls and stores the key directly)`;
  await sendAlert(deps, key, {
    severity: works ? 'error' : 'critical',
    summary: `key ${key.id}: a repeated createSecret found this rotation's intent marker but no value at version ${token}; it is not rolled again`,
    rotationId: token,
    step: 'recovery',
    errorCode: 'KR_NATIVE_VALUE_LOST',
    nextAction,
  });
  throw new NativeRotationError(
    'KR_NATIVE_VALUE_LOST',
    `key ${key.id}: the value of rotation ${token} was never stored; not rolled again. ${nextAction}`,
  );
}
