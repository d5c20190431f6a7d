// The value the latest write replaced, kept beside the value for readPrevious: a two-slot entry
// probes its standby slot's secret with it (invariant 10).
//
// Two more names of value inodes, both hard links (no copy of the secret is ever written):
// - `<file>.keyroll.current`, a second name of the value file as keyroll last saw it;
// - `<file>.keyroll.previous`, the value the latest write replaced.
// The write after the roll must stay the atomic write alone (invariant 2): no link or copy of
// the old value may come before the rename that replaces it. So the old value is kept alive
// *ahead* of that write, by its second name: the rename over `<file>` drops the value's first
// name only, and right after it `<file>.keyroll.current`, still naming the replaced inode, is
// renamed to `<file>.keyroll.previous` and the new value linked as `<file>.keyroll.current`.
// All of it happens after the durable write; the sidecar update that follows fsyncs the same
// directory, which makes both names durable at no cost of their own.
// The step is safe to run again and runs before the roll too (setIntent, under the lock), so
// a value written by hand or by a keyroll older than this file gets its second name before it is
// replaced. A `current` name whose inode is no longer the value's (a run killed between the
// rename and this step, or a hand edit that replaced the file) names the replaced value:
// readPrevious reads it there until the next step moves it.
import type { Stats } from 'node:fs';
import { chmod, link, lstat, rename } from 'node:fs/promises';
import { readTextIfExists } from './atomic.ts';

const FILE_MODE = 0o600;

export function currentPathFor(valuePath: string): string {
  return `${valuePath}.keyroll.current`;
}

export function previousPathFor(valuePath: string): string {
  return `${valuePath}.keyroll.previous`;
}

/**
 * Makes `<file>.keyroll.current` name the value file, moving the inode it named before (the value
 * the latest write replaced) to `<file>.keyroll.previous`. Removes nothing: a missing `current`
 * name (first write, older keyroll) leaves `previous` as it is, which is then still right when a
 * run was killed between the move and the link.
 */
export async function keepReplacedValue(file: string): Promise<void> {
  const current = currentPathFor(file);
  const [value, held] = await Promise.all([lstatIfExists(file), lstatIfExists(current)]);
  if (value === undefined) return;
  if (held !== undefined) {
    if (sameInode(held, value)) return;
    const previous = previousPathFor(file);
    await rename(current, previous);
    // A value keyroll wrote is 0600 already; one made by hand may not be. Only a regular file:
    // chmod follows a symlink to a file that is not ours.
    if (held.isFile() && (held.mode & 0o777) !== FILE_MODE) await chmod(previous, FILE_MODE);
  }
  try {
    await link(file, current);
  } catch (error) {
    // Another runner linked it meanwhile (a writer whose lock was taken over finishing its step):
    // the next step, or readPrevious's inode check, sorts out which inode it names.
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
}

/** The text of the value the latest write replaced, or undefined when none is kept. */
export async function readReplacedValue(file: string): Promise<string | undefined> {
  const current = currentPathFor(file);
  const [value, held] = await Promise.all([lstatIfExists(file), lstatIfExists(current)]);
  // Not moved yet: the `current` name still holds the inode the value file had before.
  if (value !== undefined && held !== undefined && !sameInode(held, value)) {
    const text = await readTextIfExists(current);
    if (text !== undefined) return text;
  }
  return readTextIfExists(previousPathFor(file));
}

function sameInode(a: Stats, b: Stats): boolean {
  return a.ino === b.ino && a.dev === b.dev;
}

async function lstatIfExists(path: string): Promise<Stats | undefined> {
  try {
    return await lstat(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
