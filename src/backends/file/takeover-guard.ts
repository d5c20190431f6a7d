// The takeover guard of a file lock, `<file>.keyroll.lock.takeover`: it exists only while one
// process changes or checks the lock. Every change of an existing lock file (a takeover, a
// refresh, a release) and every fenced value write (invariant 9) runs under it, so a lock checked
// under the guard stays exactly as read until the guard is let go: a fenced write cannot land after
// a takeover it did not see, and a release cannot remove the lock that a takeover put in place a
// moment after the release read it. Creating a lock where none exists needs no guard (the
// exclusive hard link decides alone).
//
// A guard left by a crash must go, or the key stays locked for good; but a guard whose holder is
// only paused (SIGSTOP, a frozen VM) must not let that holder act once it is gone (issue 18: a
// writer paused between its token check and its rename for over 30 s overwrote the new holder's
// secret). So the guard is a directory holding one directory of its holder, `<guard>/<id>`, and
// whatever the holder will move into place (the new lock, the value) is in there *before* the
// guard exists: the holder fills `<guard>.<id>.draft/<id>/` and renames the draft to `<guard>` in
// one step (a rename onto an existing directory that is not empty fails, so of several only one
// succeeds). Every act under the guard is then a rename whose one side lies inside
// `<guard>/<id>/`: the value or new lock moved out of it into place, a released lock moved into
// it. Removing a stale guard renames `<guard>/<id>` away, atomically: from then on that holder's
// renames find nothing (ENOENT), whenever it resumes, and the act did not happen. It is the same
// directory only while it is that holder's guard: a newer guard holds another id.
// A holder directory untouched for 30 s (its mtime) was left by a crash or belongs to a holder
// paused that long; either way it is moved aside and removed. A guard *file* at that path was left
// by an older keyroll: removed the old way (stale-guard.ts).
import { randomBytes } from 'node:crypto';
import { lstat, mkdir, readdir, rename, rm, rmdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { writeFileIn, type WriteSafety } from './atomic.ts';
import { GUARD_STALE_MS, removeStaleGuard } from './stale-guard.ts';

// How long a refresh, release or fenced write waits for another process's guard (then EBUSY,
// a retryable KR_BACKEND_UNAVAILABLE). A takeover does not wait: it reports the key busy.
const GUARD_WAIT_MS = 5_000;

export function takeoverGuardPathFor(lockPath: string): string {
  return `${lockPath}.takeover`;
}

/** A file to have in place inside the holder's directory before the guard is taken. */
export interface StagedFile {
  name: string;
  content: string;
  safety: WriteSafety;
}

/** The guard while this process holds it. */
export interface HeldGuard {
  /** The filesystem's "now": when the holder's directory was filled (a moment before the guard was taken). */
  readonly fsNowMs: number;
  /** Moves the staged file `name` to `target`. Throws EBUSY when the guard was taken from this holder: nothing moved. */
  place(name: string, target: string): Promise<void>;
  /** Removes `path` by moving it into the holder's directory: 'absent' when there was nothing. Throws EBUSY like `place`. */
  remove(path: string): Promise<'removed' | 'absent'>;
}

export interface GuardOptions {
  /** false: return 'busy' at once when another process holds the guard. */
  wait: boolean;
  stage?: StagedFile;
}

/**
 * Runs `body` while holding the guard of `lockPath`, with `options.stage` in place in the
 * holder's directory. The acts that count (`place`, `remove`) fail once the guard is no longer
 * this holder's, so nothing `body` decided under it lands after someone else took it.
 */
export async function withTakeoverGuard<T>(
  lockPath: string,
  options: GuardOptions,
  body: (guard: HeldGuard) => Promise<T>,
): Promise<T | 'busy'> {
  const guard = takeoverGuardPathFor(lockPath);
  const id = randomBytes(8).toString('hex');
  const draft = `${guard}.${id}.draft`;
  // Not recursive: a missing directory is the caller's to judge (its lock file is gone with it).
  await mkdir(draft, { mode: 0o700 });
  try {
    await mkdir(join(draft, id), { mode: 0o700 });
    if (options.stage !== undefined)
      await writeFileIn(join(draft, id), options.stage.name, options.stage.content, options.stage.safety);
    if (!(await publish(draft, guard, options.wait))) return 'busy';
  } catch (error) {
    await rm(draft, { recursive: true, force: true });
    throw error;
  }
  const own = join(guard, id);
  try {
    const held: HeldGuard = {
      fsNowMs: (await stat(own)).mtimeMs,
      place: async (name, target) => {
        await actUnderGuard(own, () => rename(join(own, name), target));
      },
      remove: async (path) => {
        try {
          await actUnderGuard(own, () => rename(path, join(own, 'removed')));
          return 'removed';
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'absent';
          throw error;
        }
      },
    };
    return await body(held);
  } finally {
    await letGo(guard, own);
  }
}

/** Renames the filled draft into place as the guard; false when busy and not waiting. */
async function publish(draft: string, guard: string, wait: boolean): Promise<boolean> {
  const started = Date.now();
  for (let delay = 2; ; delay = Math.min(delay * 2, 100)) {
    try {
      await rename(draft, guard);
      return true;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // ENOTEMPTY / EEXIST: another holder's guard; ENOTDIR: an older keyroll's guard file.
      if (code !== 'ENOTEMPTY' && code !== 'EEXIST' && code !== 'ENOTDIR') throw error;
    }
    if (await removeStaleHolders(guard)) continue;
    if (!wait) {
      await rm(draft, { recursive: true, force: true });
      return false;
    }
    if (Date.now() - started > GUARD_WAIT_MS) {
      await rm(draft, { recursive: true, force: true });
      throw busy(guard);
    }
    await sleep(delay);
  }
}

/**
 * Moves aside the holder directories of `guard` untouched for GUARD_STALE_MS, so their holders'
 * acts find nothing; true when the guard can be taken now (gone, empty, or emptied).
 */
async function removeStaleHolders(guard: string): Promise<boolean> {
  let holders: string[];
  try {
    holders = await readdir(guard);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return true;
    if (code === 'ENOTDIR') return removeStaleGuard(guard);
    throw error;
  }
  for (const holder of holders) {
    try {
      if (Date.now() - (await lstat(join(guard, holder))).mtimeMs <= GUARD_STALE_MS) return false;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return true;
      throw error;
    }
  }
  for (const holder of holders) {
    const aside = `${guard}.${holder}.stale`;
    try {
      await rename(join(guard, holder), aside);
    } catch (error) {
      // Gone meanwhile (released, or moved aside by another contender): try to take the guard again.
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      continue;
    }
    // What it held (a staged value is a secret) goes with it; best effort, like any temp file.
    await rm(aside, { recursive: true, force: true }).catch(() => undefined);
  }
  return true;
}

/** Runs one act of the holder whose directory is `own`; a vanished `own` means the guard was taken: EBUSY. */
async function actUnderGuard(own: string, act: () => Promise<void>): Promise<void> {
  try {
    await act();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' && !(await exists(own))) throw busy(own);
    throw error;
  }
}

/** Removes this holder's directory (and anything still staged in it), then the guard if it is empty now. */
async function letGo(guard: string, own: string): Promise<void> {
  await rm(own, { recursive: true, force: true }).catch(() => undefined);
  // Only an empty directory goes: a guard another holder put in place meanwhile holds its directory.
  await rmdir(guard).catch(() => undefined);
}

async function exists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch {
    return false;
  }
}

function busy(path: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${path} is held by another process`), { code: 'EBUSY' });
}
