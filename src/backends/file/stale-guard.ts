// The guards of the file backend (the sidecar's `<file>.keyroll.json.guard`, the lock's
// `<file>.keyroll.lock.takeover`) exist only while one process does a few file operations. One
// older than this was left by a crash (or its holder is paused that long). Real file times, not the
// injected clock: the guard's age is a fact of this filesystem. This removes a guard *file*: the
// sidecar's, and a takeover guard of an older keyroll; the takeover guard is a directory now, whose
// removal makes its holder's acts fail (takeover-guard.ts).
import { stat, unlink } from 'node:fs/promises';

export const GUARD_STALE_MS = 30_000;

/** Removes a guard left by a crash; true when it is gone (removed now or meanwhile). */
export async function removeStaleGuard(guard: string): Promise<boolean> {
  try {
    if (Date.now() - (await stat(guard)).mtimeMs <= GUARD_STALE_MS) return false;
    await unlink(guard);
    return true;
  } catch (error) {
    // Gone meanwhile: try to create it again. Any other error: wait like for a live guard.
    return (error as NodeJS.ErrnoException).code === 'ENOENT';
  }
}
