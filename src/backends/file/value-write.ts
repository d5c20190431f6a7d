// The write of a value file after the roll (invariant 2: its first I/O is the write itself).
// Unfenced: the atomic write alone (temp, fsync, rename, fsync of the directory). Fenced
// (invariant 9): the same, but the rename happens under the lock's takeover guard and only while
// the lock file still carries the writer's token, so a runner whose lock was taken over never
// replaces what the new holder stored. The temp file is written and fsynced before the guard is
// taken, so the guard is held for one read and one rename.
import { mkdir, rename, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { HeldLock } from '../types.ts';
import { syncDirectory, writeFileAtomic, writeTempFile } from './atomic.ts';
import { whileFileLockHeld } from './lock.ts';

const DIRECTORY_MODE = 0o700;

/**
 * The atomic write of the value, nothing before it: preflight and the lock created the directory.
 * Only a write that finds no directory (a caller that skipped both) creates it and writes again.
 */
export async function writeValueDurably(file: string, content: string): Promise<void> {
  try {
    await writeFileAtomic(file, content);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    await mkdir(dirname(file), { recursive: true, mode: DIRECTORY_MODE });
    await writeFileAtomic(file, content);
  }
}

/**
 * The fenced write: 'lost' (nothing visible changed, the temp file removed) when the lock file no
 * longer carries `lock`'s token. A missing directory means the lock file is gone with it: lost.
 */
export async function writeValueFenced(file: string, content: string, lock: HeldLock): Promise<'written' | 'lost'> {
  let temp: string;
  try {
    temp = await writeTempFile(file, content);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'lost';
    throw error;
  }
  let outcome: 'lost' | 'renamed';
  try {
    outcome = await whileFileLockHeld(file, lock, async () => {
      await rename(temp, file);
      return 'renamed' as const;
    });
  } catch (error) {
    await unlink(temp).catch(() => undefined);
    throw error;
  }
  if (outcome === 'lost') {
    await unlink(temp).catch(() => undefined);
    return 'lost';
  }
  await syncDirectory(dirname(file));
  return 'written';
}
