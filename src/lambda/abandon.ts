// Giving up a native rotation between its steps (testSecret refused the value, finishSecret lost
// the lock): the lock is given back where it is still this rotation's, and AWSPENDING is removed
// unless the value there is the only working copy of the key (`standby` false: the active slot was
// rolled), which an alert then names instead.
import { underKeyLock } from '../rotation/public/key-lock.ts';
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
    // Taken only where it is still this rotation's (same owner and rotation id), and given back at once.
    await underKeyLock({ key, destinations: [primary], owner: nativeOwner(token), rotationId: token }, () =>
      Promise.resolve(),
    );
  } catch {
    // The lock expires by its TTL.
  }
}
