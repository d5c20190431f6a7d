// Giving up a native rotation between its steps (testSecret refused the value, finishSecret lost
// the lock): the lock is given back where it is still this rotation's, and AWSPENDING is removed
// unless the value there is the only working copy of the key (`standby` false: the active slot was
// rolled), which an alert then names instead.
import type { NativeContext } from './context.ts';
import { nativeOwner } from './context.ts';
import { dropPending } from './pending-cleanup.ts';

export async function abandonRotation(ctx: NativeContext, step: string, standby: boolean): Promise<void> {
  const { key, primary, token } = ctx;
  if (standby) {
    await dropPending(ctx, step);
    // The marker names a standby whose value nobody holds: cleared, nothing to repair.
    await primary.backend.clearIntent(primary.target, token).catch(() => undefined);
  }
  try {
    const taken = await primary.backend.acquireLock(primary.target, { owner: nativeOwner(token), rotationId: token, ttlMs: key.lockTtlMs, clockSkewMs: key.clockSkewMs });
    if (taken.acquired) await primary.backend.releaseLock(primary.target, taken.lock);
  } catch {
    // The lock expires by its TTL.
  }
}
