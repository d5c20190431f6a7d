// finishSecret: AWSCURRENT moves to the token's version (AWS moves AWSPREVIOUS to the value it
// left: the previous active slot, still alive for a full period, invariant 10), AWSPENDING is
// removed explicitly, and the rotation is recorded with the active slot, the intent marker cleared
// and the key lock given back in the same tag change (backends/aws/records.ts). Under the lock
// createSecret took (same owner and rotation id, from the token), so a runner that took the key
// over meanwhile is never overruled (invariant 9). Safe to repeat: a version already AWSCURRENT
// only has what is left done.
import { activeStreak, endedStreak } from '../rotation/public/failure-streak.ts';
import { activeSlot } from '../rotation/public/slots.ts';
import { recordFailureBestEffort } from '../rotation/public/store-outcome.ts';
import { sendAlert } from '../rotation/public/key-alert.ts';
import { readTrustedState } from '../rotation/public/trusted-state.ts';
import { AWS_CURRENT, AWS_PENDING, versionWith, type NativeRotationView } from '../backends/public/native.ts';
import type { KeyState, LockInfo } from '../backends/public/types.ts';
import { releaseKeyLock, takeKeyLock } from '../rotation/public/key-lock.ts';
import type { NativeContext } from './context.ts';
import { nativeOwner } from './context.ts';
import { NativeRotationError } from './errors.ts';
import { abandonRotation } from './abandon.ts';
import { dropPending, finishCommand } from './pending-cleanup.ts';

export type FinishOutcome = 'finished' | 'already-current';

export async function finishSecret(ctx: NativeContext): Promise<FinishOutcome> {
  const { key, primary, native, token, deps, audit } = ctx;
  const path = primary.target.path;
  const view = await native.describe(path);
  const alreadyCurrent = view.versions[token]?.includes(AWS_CURRENT) === true;
  const pending = alreadyCurrent ? undefined : await native.readVersion(primary.target, token);
  if (!alreadyCurrent && pending === undefined) {
    await dropPending(ctx, 'finishSecret');
    throw new NativeRotationError(
      'KR_NATIVE_NO_PENDING',
      `key ${key.id}: version ${token} of ${path} has no value; AWSCURRENT was not moved and AWSPENDING was removed`,
    );
  }
  const state = await readTrustedState(primary, key, deps.now());
  const ours = state.intent?.rotationId === token;
  // A late finishSecret of a rotation another one replaced (its marker gone, AWSPENDING moved on)
  // must never make its value current: that value's slot may have been rolled since.
  if (!alreadyCurrent && (!ours || view.versions[token]?.includes(AWS_PENDING) !== true)) {
    throw new NativeRotationError(
      'KR_NATIVE_NO_PENDING',
      `key ${key.id}: version ${token} is no longer this key's pending rotation (its intent marker or AWSPENDING label is gone); AWSCURRENT was not moved`,
    );
  }
  const rolledKeyId = (ours ? state.intent?.keyId : undefined) ?? pending?.keyId;
  const taken = await takeKeyLock({
    key,
    destinations: [primary],
    owner: nativeOwner(token),
    rotationId: token,
  });
  if ('busy' in taken) {
    if (alreadyCurrent) return 'already-current';
    return refuseTakenOver(ctx, taken.busy, state, rolledKeyId);
  }
  // One destination locked, so one lock: the primary's.
  const { held } = taken;
  try {
    if (!alreadyCurrent) await moveCurrentToToken(ctx, view);
    await native.removePending(path, token);
    // Still under the lock: a success ends the key's failure streak (earlier failed steps), as a rotation by run does.
    const streak = activeStreak(state);
    if (streak !== undefined && !alreadyCurrent) await recordFailureBestEffort(primary, endedStreak(streak));
    if (ours || !alreadyCurrent) {
      await primary.backend.recordRotation(
        primary.target,
        {
          rotationId: token,
          rotatedAt: (ours ? state.intent?.startedAt : undefined) ?? deps.now().toISOString(),
          version: token,
          ...(rolledKeyId === undefined ? {} : { keyId: rolledKeyId }),
        },
        { clearIntent: true, releaseLock: held[0]?.lock },
      );
    }
    audit.emit('key.native.step', {
      step: 'finishSecret',
      did: alreadyCurrent ? 'already-current' : 'finished',
      version: token,
      ...(rolledKeyId === undefined ? {} : { activeKeyId: rolledKeyId }),
    });
    if (!alreadyCurrent)
      audit.emit('key.succeeded', {
        step: 'finish',
        native: true,
        versions: [{ backend: primary.backendName, path, version: token }],
        ...(key.slots ? { activeKeyId: rolledKeyId } : {}),
      });
    return alreadyCurrent ? 'already-current' : 'finished';
  } finally {
    // Best effort (key-lock.ts): after the record above gave the lock back in its tag change this
    // sends nothing; a lock that cannot be given back expires by its TTL.
    await releaseKeyLock(held);
  }
}

/** Invariant 9: another runner took the key over after this rotation's lock ran out. */
async function refuseTakenOver(
  ctx: NativeContext,
  busy: LockInfo,
  state: KeyState,
  rolledKeyId: string | undefined,
): Promise<never> {
  const { key, token, deps } = ctx;
  const standby =
    key.slots !== undefined && rolledKeyId !== undefined && rolledKeyId !== activeSlot(key.slots, state);
  await abandonRotation(ctx, 'finishSecret', standby);
  if (!standby)
    await sendAlert(deps, key, {
      severity: 'critical',
      summary: `key ${key.id}: finishSecret found the key lock held by ${busy.owner}`,
      rotationId: token,
      step: 'finish',
      errorCode: 'KR_LOCK_LOST',
      nextAction: finishCommand(ctx),
    });
  throw new NativeRotationError(
    'KR_LOCK_LOST',
    `key ${key.id}: the key lock is held by ${busy.owner} (rotation ${busy.rotationId}); AWSCURRENT was not moved`,
  );
}

/** Moves AWSCURRENT to the token's version, re-reading the labels when another writer moved it first. */
async function moveCurrentToToken(ctx: NativeContext, first: NativeRotationView): Promise<void> {
  const { key, native, token } = ctx;
  const path = ctx.primary.target.path;
  let view = first;
  for (let round = 0; round < 3; round++) {
    if ((await native.moveCurrent(path, versionWith(view, AWS_CURRENT), token)) === 'moved') break;
    view = await native.describe(path);
    if (view.versions[token]?.includes(AWS_CURRENT) === true) break;
    if (round === 2)
      throw new NativeRotationError(
        'KR_LOCK_LOST',
        `key ${key.id}: AWSCURRENT of ${path} kept moving while finishSecret moved it`,
      );
  }
}
