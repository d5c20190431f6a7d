// The key lock of a file destination (invariant 5): `<file>.keyroll.lock`, created exclusively
// (a finished temp file hard-linked into place, so the create is atomic and never half-written).
// Every change of an existing lock file (takeover, refresh, release) and every fenced value write
// runs under the takeover guard (takeover-guard.ts), after re-reading that the lock is still
// exactly what the change was decided on: two runners racing for a stale lock cannot both win,
// and a runner whose lock was taken over can neither refresh, release nor write (invariant 9).
// The change itself is a rename through the guard's holder directory, so one decided under a
// guard that was since taken away (a holder paused past the guard's staleness) does not happen.
// Lock files are written atomically but not fsynced (atomic.ts, WriteSafety): they matter only
// while their runner lives, and one lost or torn by a power cut reads as free or expired.
//
// When a lock is stale (invariant 9: "file-lock staleness is judged by the contender's clock" was
// the hole). A lock of another owner is taken over only when BOTH say so:
// - keyroll's clock (BackendDeps.now): now >= expiresAt + clockSkewMs. `expiresAt` was computed
//   by the writer's clock, so this rule alone trusts two clocks to agree;
// - the filesystem's clock: the lock file's age, the mtime of the takeover guard's holder directory
//   (filled just now in the same directory) minus the lock file's mtime, is at least the lock's
//   ttlMs + clockSkewMs.
//   Both mtimes are stamped by the one clock of the filesystem (the kernel's, or the file
//   server's on NFS), so neither runner's clock enters it: a runner whose clock runs ahead, or
//   one that wrote its lock with a clock running behind, cannot make a fresh lock look stale.
// Every refresh rewrites the file, so its mtime restarts with each extension.
// Tests move keyroll's clock by hand (BackendDeps.now), and the filesystem cannot follow a
// simulated clock: each lock records `clockOffsetMs`, how far its writer's keyroll clock stood
// from the system clock when it wrote (0 in production, where keyroll's clock is the system
// clock), and the filesystem age counts the judge's offset minus the writer's as time that
// passed. In production that term is 0 and the age is the filesystem's alone.
// A lock written by a keyroll before fenced locks has no ttlMs: keyroll's clock judges it alone.
// A lock whose owner the caller proved dead (LockRequest.deadOwners) is taken over whatever both
// clocks say, through the same guard and the same re-read: still only if it is exactly the lock
// read, so a lock a live runner took meanwhile is never the one replaced.
// An unreadable lock file counts as expired long ago by both rules.
import { randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { z } from 'zod';
import type { HeldLock, LockInfo, LockOutcome, LockRequest } from '../types.ts';
import { createFileExclusive, readTextIfExists } from './atomic.ts';
import { withTakeoverGuard, type StagedFile } from './takeover-guard.ts';

export const FileLock = z.object({
  owner: z.string(),
  rotationId: z.string(),
  expiresAt: z.string(),
  /** Random per acquisition, so a release, refresh or fenced write acts only on the lock it took. */
  token: z.string(),
  /** The TTL of the last acquisition or refresh: the filesystem age at which the lock is stale. */
  ttlMs: z.number().nonnegative().optional(),
  /** The writer's keyroll clock minus its system clock, in ms (0 unless a test moves the clock). */
  clockOffsetMs: z.number().optional(),
});
export type FileLock = z.infer<typeof FileLock>;

/** keyroll's clock: BackendDeps.now. */
export type LockClock = () => Date;

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
  return {
    lock: parseLock(text) ?? {
      owner: 'unknown',
      rotationId: 'unknown',
      expiresAt: new Date(0).toISOString(),
      token: '',
    },
    text,
  };
}

export async function readLockInfo(valuePath: string): Promise<LockInfo | undefined> {
  const found = await readFileLock(valuePath);
  return found === undefined ? undefined : publicInfo(found.lock);
}

function held(lock: FileLock, tookOver: boolean): HeldLock {
  return { ...publicInfo(lock), token: lock.token, tookOver };
}

/** The lock content for `ttlMs` from keyroll's now, with the writer's clock offset. */
function lockContent(
  base: Pick<FileLock, 'owner' | 'rotationId' | 'token'>,
  ttlMs: number,
  clock: LockClock,
): FileLock {
  const now = clock().getTime();
  return { ...base, expiresAt: new Date(now + ttlMs).toISOString(), ttlMs, clockOffsetMs: now - Date.now() };
}

export async function acquireFileLock(
  valuePath: string,
  request: LockRequest,
  clock: LockClock,
): Promise<LockOutcome> {
  const mine = lockContent(
    { owner: request.owner, rotationId: request.rotationId, token: randomBytes(12).toString('hex') },
    request.ttlMs,
    clock,
  );
  const text = JSON.stringify(mine);
  const attempt = { tookOver: false };
  try {
    return await takeFileLock(valuePath, mine, request, clock, attempt);
  } catch (error) {
    // A failure after the lock file landed (e.g. removing the temp file after the link): the
    // lock is ours, and a caller that only saw the error would never release it.
    const current = await readFileLock(valuePath).catch(() => undefined);
    if (current?.lock.token === mine.token && current.text === text)
      return { acquired: true, lock: held(mine, attempt.tookOver) };
    throw error;
  }
}

/** The acquisition itself; `attempt.tookOver` says whether the write in flight takes over another's lock. */
async function takeFileLock(
  valuePath: string,
  mine: FileLock,
  request: LockRequest,
  clock: LockClock,
  attempt: { tookOver: boolean },
): Promise<LockOutcome> {
  const path = lockPathFor(valuePath);
  const text = JSON.stringify(mine);
  const skewMs = request.clockSkewMs ?? 0;
  // A few rounds: the lock can vanish (released) between our create attempt and our read.
  for (let round = 0; round < 5; round++) {
    attempt.tookOver = false;
    if (await createFileExclusive(path, text, 'atomic')) return { acquired: true, lock: held(mine, false) };
    const current = await readFileLock(valuePath);
    if (current === undefined) continue;
    const { lock } = current;
    const sameHolder = lock.owner === request.owner && lock.rotationId === request.rotationId;
    // A holder proven dead (LockRequest.deadOwners) cannot act again: neither clock need agree.
    const dead = !sameHolder && (request.deadOwners?.includes(lock.owner) ?? false);
    if (!sameHolder && !dead && !staleByClock(lock, clock, skewMs))
      return { acquired: false, holder: publicInfo(lock) };
    // Our own lock (a retried acquire) is refreshed; a stale one is taken over once the
    // filesystem agrees it is stale. Both replace the file only if it still holds exactly what
    // we read, all under the takeover guard.
    attempt.tookOver = !sameHolder;
    const replaced = await withTakeoverGuard(
      path,
      { wait: false, stage: { name: 'lock', content: text, safety: 'atomic' } },
      async (guard) => {
        if ((await readTextIfExists(path)) !== current.text) return 'changed';
        if (!sameHolder && !dead && !(await staleByFilesystem(path, lock, guard.fsNowMs, clock, skewMs)))
          return 'fresh';
        try {
          await guard.place('lock', path);
        } catch (error) {
          // The guard was taken from us (we were paused that long): nothing moved; look again.
          if ((error as NodeJS.ErrnoException).code === 'EBUSY') return 'changed';
          throw error;
        }
        return 'replaced';
      },
    );
    if (replaced === 'replaced') return { acquired: true, lock: held(mine, !sameHolder) };
    if (replaced === 'fresh') return { acquired: false, holder: publicInfo(lock) };
    if (replaced === 'busy') {
      const contender = await readFileLock(valuePath);
      if (contender !== undefined) return { acquired: false, holder: publicInfo(contender.lock) };
    }
  }
  const last = await readFileLock(valuePath);
  return { acquired: false, holder: last === undefined ? publicInfo(mine) : publicInfo(last.lock) };
}

/** keyroll's clock says the lock expired clockSkewMs ago (an unreadable expiry: long ago). */
function staleByClock(lock: FileLock, clock: LockClock, skewMs: number): boolean {
  const expiry = Date.parse(lock.expiresAt);
  return Number.isNaN(expiry) || expiry + skewMs <= clock().getTime();
}

/**
 * The filesystem's clock says the lock file is older than its TTL plus the skew margin. Called
 * under the guard, whose holder directory's mtime (`fsNowMs`) the same filesystem clock stamped a
 * moment ago.
 */
async function staleByFilesystem(
  path: string,
  lock: FileLock,
  fsNowMs: number,
  clock: LockClock,
  skewMs: number,
): Promise<boolean> {
  if (lock.ttlMs === undefined) return true;
  const fileAgeMs = fsNowMs - (await stat(path)).mtimeMs;
  // Simulated time (tests move keyroll's clock): the judge's offset minus the writer's; 0 in production.
  const simulatedMs = clock().getTime() - Date.now() - (lock.clockOffsetMs ?? 0);
  return fileAgeMs + simulatedMs >= lock.ttlMs + skewMs;
}

/** True when the lock file at `path`, as read now, is still exactly the lock `lock` took. */
function stillHeld(text: string | undefined, lock: HeldLock): boolean {
  if (text === undefined) return false;
  const current = parseLock(text);
  return (
    current !== undefined &&
    current.token === lock.token &&
    current.owner === lock.owner &&
    current.rotationId === lock.rotationId
  );
}

/**
 * Extends `lock` to `ttlMs` from now if the lock file still carries its token (never creates
 * one): the new content replaces the file under the takeover guard, so a takeover either came
 * first (undefined: lost) or waits for the refreshed lock. The token stays, so the lock the caller
 * holds keeps fencing its writes and releasing the lock.
 */
export async function refreshFileLock(
  valuePath: string,
  lock: HeldLock,
  ttlMs: number,
  clock: LockClock,
): Promise<HeldLock | undefined> {
  const path = lockPathFor(valuePath);
  const next = lockContent(lock, ttlMs, clock);
  // A guard taken from us meanwhile throws EBUSY from place(): unproven, not lost (the caller retries).
  const refreshed = await withTakeoverGuard(
    path,
    { wait: true, stage: { name: 'lock', content: JSON.stringify(next), safety: 'atomic' } },
    async (guard) => {
      if (!stillHeld(await readTextIfExists(path), lock)) return undefined;
      await guard.place('lock', path);
      return held(next, lock.tookOver);
    },
  );
  return refreshed === 'busy' ? undefined : refreshed;
}

/**
 * Moves `value` (staged in the guard's holder directory before the guard is taken) to
 * `valuePath` only while the lock file carries `lock`'s token, under the takeover guard, so no
 * takeover can land between the check and the move, and a move whose guard was taken from it
 * (paused past the guard's staleness) fails with EBUSY, retryable, having moved nothing.
 * Returns 'lost' without moving it when the lock is not `lock` any more (invariant 9).
 */
export async function placeWhileFileLockHeld(
  valuePath: string,
  lock: HeldLock,
  value: StagedFile,
): Promise<'placed' | 'lost'> {
  const path = lockPathFor(valuePath);
  const result = await withTakeoverGuard(path, { wait: true, stage: value }, async (guard) => {
    if (!stillHeld(await readTextIfExists(path), lock)) return 'lost' as const;
    await guard.place(value.name, valuePath);
    return 'placed' as const;
  });
  // 'busy' only comes back without waiting; with waiting, a guard never freed throws EBUSY.
  return result === 'busy' ? 'lost' : result;
}

/** Removes the lock only when it is still the one `lock` took (a taken-over lock is left alone). */
export async function releaseFileLock(valuePath: string, lock: HeldLock): Promise<void> {
  const path = lockPathFor(valuePath);
  // Cheap look first: a lock that is gone or someone else's needs no guard.
  if (parseLock((await readTextIfExists(path)) ?? '')?.token !== lock.token) return;
  // Re-checked under the guard: a takeover between the look and the removal must not be removed.
  await withTakeoverGuard(path, { wait: true }, async (guard) => {
    if (parseLock((await readTextIfExists(path)) ?? '')?.token !== lock.token) return;
    await guard.remove(path);
  });
}
