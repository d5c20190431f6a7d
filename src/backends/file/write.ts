// The write of a value file after the roll (invariant 2: its first I/O is the write itself).
// Unfenced: the atomic write alone (temp, fsync, rename, fsync of the directory). Fenced
// (invariant 9): the same, but the value is written into the takeover guard's holder directory and
// renamed into place under the guard, only while the lock file still carries the writer's token,
// so a runner whose lock was taken over never replaces what the new holder stored, not even one
// paused between its check and its rename (takeover-guard.ts).
import { mkdir, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { HeldLock } from '../types.ts';
import { DIRECTORY_MODE, syncDirectory, writeFileAtomic } from './atomic.ts';
import { placeWhileFileLockHeld } from './lock.ts';

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
 * The fenced write: 'lost' (nothing visible changed) when the lock file no longer carries `lock`'s
 * token. The value is written and fsynced inside the takeover guard's holder directory before the
 * guard is taken, so the guard is held for one read and one rename, and a rename whose guard was
 * taken away fails (EBUSY, retryable: the retry checks the lock again). A missing directory means
 * the lock file is gone with it: lost.
 */
export async function writeValueFenced(file: string, content: string, lock: HeldLock): Promise<'written' | 'lost'> {
  let outcome: 'placed' | 'lost';
  try {
    outcome = await placeWhileFileLockHeld(file, lock, { name: 'value', content, safety: 'durable' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' && !(await directoryExists(dirname(file)))) return 'lost';
    throw error;
  }
  if (outcome === 'lost') return 'lost';
  await syncDirectory(dirname(file));
  return 'written';
}

async function directoryExists(directory: string): Promise<boolean> {
  try {
    return (await stat(directory)).isDirectory();
  } catch {
    return false;
  }
}
