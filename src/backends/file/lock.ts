// The key lock of a file destination (invariant 5): `<file>.keyroll.lock`, created exclusively
// (a finished temp file hard-linked into place, so the create is atomic and never half-written).
// A lock past its `expiresAt` is stale; taking it over happens under a short-lived takeover
// guard (`<file>.keyroll.lock.takeover`, also created exclusively), after re-reading that the
// lock is still the same stale one, so two runners racing for a stale lock cannot both win.
// Lock files are written atomically but not fsynced (atomic.ts, WriteSafety): they matter only
// while their runner lives, and one lost or torn by a power cut reads as free or expired.
import { randomBytes } from 'node:crypto';
import { readFile, rename, stat, unlink } from 'node:fs/promises';
import { z } from 'zod';
import type { HeldLock, LockInfo, LockOutcome, LockRequest } from '../types.ts';
import { createFileExclusive, readTextIfExists, writeTempFile } from './atomic.ts';

export const FileLock = z.object({
  owner: z.string(),
  rotationId: z.string(),
  expiresAt: z.string(),
  /** Random per acquisition, so a release only removes the lock it took. */
  token: z.string(),
});
export type FileLock = z.infer<typeof FileLock>;

// The guard is held for a few file operations; one older than this was left by a crash.
// Real file times, not the injected clock: the guard's age is a fact of this filesystem.
const GUARD_STALE_MS = 30_000;

export function lockPathFor(valuePath: string): string {
  return `${valuePath}.keyroll.lock`;
}

function parseLock(text: string): FileLock | undefined {
  try {
    const parsed = FileLock.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

function publicInfo(lock: FileLock): LockInfo {
  return { owner: lock.owner, rotationId: lock.rotationId, expiresAt: lock.expiresAt };
}

/** The lock on `valuePath`, if any. An unreadable lock file reads as a lock that expired long ago. */
export async function readFileLock(valuePath: string): Promise<{ lock: FileLock; text: string } | undefined> {
  const text = await readTextIfExists(lockPathFor(valuePath));
  if (text === undefined) return undefined;
  return { lock: parseLock(text) ?? { owner: 'unknown', rotationId: 'unknown', expiresAt: new Date(0).toISOString(), token: '' }, text };
}

export async function readLockInfo(valuePath: string): Promise<LockInfo | undefined> {
  const found = await readFileLock(valuePath);
  return found === undefined ? undefined : publicInfo(found.lock);
}

function held(lock: FileLock, tookOver: boolean): HeldLock {
  return { ...publicInfo(lock), token: lock.token, tookOver };
}

export async function acquireFileLock(valuePath: string, request: LockRequest, now: Date): Promise<LockOutcome> {
  const mine: FileLock = {
    owner: request.owner,
    rotationId: request.rotationId,
    expiresAt: new Date(now.getTime() + request.ttlMs).toISOString(),
    token: randomBytes(12).toString('hex'),
  };
  const text = JSON.stringify(mine);
  const attempt = { tookOver: false };
  try {
    return await takeFileLock(valuePath, mine, request, now, attempt);
  } catch (error) {
    // A failure after the lock file landed (e.g. removing the temp file after the link): the
    // lock is ours, and a caller that only saw the error would never release it.
    const current = await readFileLock(valuePath).catch(() => undefined);
    if (current?.lock.token === mine.token && current.text === text) return { acquired: true, lock: held(mine, attempt.tookOver) };
    throw error;
  }
}

/** The acquisition itself; `attempt.tookOver` says whether the write in flight takes over another's lock. */
async function takeFileLock(valuePath: string, mine: FileLock, request: LockRequest, now: Date, attempt: { tookOver: boolean }): Promise<LockOutcome> {
  const path = lockPathFor(valuePath);
  const text = JSON.stringify(mine);
  // A few rounds: the lock can vanish (released) between our create attempt and our read.
  for (let round = 0; round < 5; round++) {
    attempt.tookOver = false;
    if (await createFileExclusive(path, text, 'atomic')) return { acquired: true, lock: held(mine, false) };
    const current = await readFileLock(valuePath);
    if (current === undefined) continue;
    const { lock } = current;
    const sameHolder = lock.owner === request.owner && lock.rotationId === request.rotationId;
    const stale = Date.parse(lock.expiresAt) <= now.getTime() || Number.isNaN(Date.parse(lock.expiresAt));
    if (!sameHolder && !stale) return { acquired: false, holder: publicInfo(lock) };
    // Our own lock (a retried acquire) is refreshed; a stale one is taken over. Both replace
    // the file only if it still holds exactly what we read.
    attempt.tookOver = !sameHolder;
    const replaced = await replaceLockIf(path, current.text, text);
    if (replaced === 'replaced') return { acquired: true, lock: held(mine, !sameHolder) };
    if (replaced === 'busy') {
      const contender = await readFileLock(valuePath);
      if (contender !== undefined) return { acquired: false, holder: publicInfo(contender.lock) };
    }
  }
  const last = await readFileLock(valuePath);
  return { acquired: false, holder: last === undefined ? publicInfo(mine) : publicInfo(last.lock) };
}

/** Swaps the lock file for `next` if it still reads `expected`, under the takeover guard. */
async function replaceLockIf(path: string, expected: string, next: string): Promise<'replaced' | 'changed' | 'busy'> {
  const guard = `${path}.takeover`;
  if (!(await createFileExclusive(guard, String(process.pid), 'atomic'))) {
    await removeStaleGuard(guard);
    return 'busy';
  }
  try {
    const current = await readTextIfExists(path);
    if (current !== expected) return 'changed';
    const temp = await writeTempFile(path, next, 'atomic');
    await rename(temp, path);
    return 'replaced';
  } finally {
    await unlink(guard).catch(() => undefined);
  }
}

async function removeStaleGuard(guard: string): Promise<void> {
  try {
    const info = await stat(guard);
    if (Date.now() - info.mtimeMs > GUARD_STALE_MS) await unlink(guard);
  } catch {
    // gone already
  }
}

/** Removes the lock only when it is still the one `held` took (a taken-over lock is left alone). */
export async function releaseFileLock(valuePath: string, lock: HeldLock): Promise<void> {
  const path = lockPathFor(valuePath);
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  if (parseLock(text)?.token !== lock.token) return;
  await unlink(path).catch((error: unknown) => {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  });
}
