// The takeover guard of a file lock, `<file>.keyroll.lock.takeover`: an exclusively created file
// that exists only while one process changes or checks the lock. Every change of an existing
// lock file (a takeover, a refresh, a release) and every fenced value write (invariant 9) runs
// under it, so a lock checked under the guard stays exactly as read until the guard is let go:
// a fenced write cannot land after a takeover it did not see, and a release cannot remove the
// lock that a takeover put in place a moment after the release read it.
// Creating a lock where none exists needs no guard (the exclusive hard link decides alone).
// A guard left by a crash is removed after 30 s (stale-guard.ts).
import { stat, unlink } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { createFileExclusive } from './atomic.ts';
import { removeStaleGuard } from './stale-guard.ts';

// How long a refresh, release or fenced write waits for another process's guard (then EBUSY,
// a retryable KR_BACKEND_UNAVAILABLE). A takeover does not wait: it reports the key busy.
const GUARD_WAIT_MS = 5_000;

export function takeoverGuardPathFor(lockPath: string): string {
  return `${lockPath}.takeover`;
}

/**
 * Runs `body` while holding the guard of `lockPath`; `guardMtimeMs` is the guard's mtime, the
 * filesystem's "now" (stamped by the same clock as the lock file's mtime). `wait: false`
 * returns 'busy' at once when another process holds the guard.
 */
export async function withTakeoverGuard<T>(lockPath: string, wait: boolean, body: (guardMtimeMs: number) => Promise<T>): Promise<T | 'busy'> {
  const guard = takeoverGuardPathFor(lockPath);
  const started = Date.now();
  for (let delay = 2; ; delay = Math.min(delay * 2, 100)) {
    if (await createFileExclusive(guard, String(process.pid), 'atomic')) break;
    if (await removeStaleGuard(guard)) continue;
    if (!wait) return 'busy';
    if (Date.now() - started > GUARD_WAIT_MS) {
      throw Object.assign(new Error(`${guard} is held by another process`), { code: 'EBUSY' });
    }
    await sleep(delay);
  }
  try {
    return await body((await stat(guard)).mtimeMs);
  } finally {
    await unlink(guard).catch(() => undefined);
  }
}
