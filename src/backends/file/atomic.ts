// Durable file writes for the file backend. A value file is never half-written: the new content
// goes to a temp file in the same directory, is fsynced, renamed over the target (atomic on
// POSIX), and the directory is fsynced so the rename itself survives a power cut (invariant 6:
// a crash at any instant leaves either the old or the new secret, never a torn one).
import { randomBytes } from 'node:crypto';
import { link, open, readFile, rename, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

const FILE_MODE = 0o600;
/** Directories the file backend creates: its owner only, like the files in them. */
export const DIRECTORY_MODE = 0o700;

/** A temp file name next to `path`, hidden and unique, so a crash leaves recognisable debris. */
export function tempPathFor(path: string): string {
  return join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`);
}

/**
 * How a write must survive a power cut. `durable` (values, the sidecar with the intent marker):
 * fsync of the file and of its directory. `atomic` (lock files): the same temp-then-link/rename,
 * so no reader ever sees a partial file, but no fsync: a lock only excludes runners that are
 * alive, a power cut ends every runner on the host, and a lock file lost or torn by one reads as
 * free or long expired (lock.ts), while the durable intent marker drives the recovery.
 */
export type WriteSafety = 'durable' | 'atomic';

/** Writes `content` to a new temp file next to `path` (mode 0600, fsynced when durable) and returns its path. */
export async function writeTempFile(
  path: string,
  content: string,
  safety: WriteSafety = 'durable',
): Promise<string> {
  const temp = tempPathFor(path);
  const handle = await open(temp, 'wx', FILE_MODE);
  try {
    await handle.writeFile(content, 'utf8');
    if (safety === 'durable') await handle.sync();
  } catch (error) {
    await handle.close();
    await unlink(temp).catch(() => undefined);
    throw error;
  }
  await handle.close();
  return temp;
}

/** Creates `directory/name` with `content` (mode 0600, fsynced when durable); it must not exist yet. */
export async function writeFileIn(
  directory: string,
  name: string,
  content: string,
  safety: WriteSafety,
): Promise<void> {
  const path = join(directory, name);
  const handle = await open(path, 'wx', FILE_MODE);
  try {
    await handle.writeFile(content, 'utf8');
    if (safety === 'durable') await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Makes a finished rename or link durable. Some filesystems cannot fsync a directory; that is not an error. */
export async function syncDirectory(directory: string): Promise<void> {
  let handle;
  try {
    handle = await open(directory, 'r');
    await handle.sync();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'EINVAL' && code !== 'EISDIR' && code !== 'EPERM') throw error;
  } finally {
    await handle?.close();
  }
}

/** Replaces `path` with `content` atomically and durably (temp, fsync, rename, fsync dir). */
export async function writeFileAtomic(path: string, content: string): Promise<void> {
  const temp = await writeTempFile(path, content);
  try {
    await rename(temp, path);
  } catch (error) {
    await unlink(temp).catch(() => undefined);
    throw error;
  }
  await syncDirectory(dirname(path));
}

/**
 * Creates `path` with `content` only if it does not exist (hard link of a finished temp file,
 * which fails with EEXIST atomically), so no reader ever sees an empty or partial file.
 * Returns false when `path` already exists.
 */
export async function createFileExclusive(
  path: string,
  content: string,
  safety: WriteSafety = 'durable',
): Promise<boolean> {
  const temp = await writeTempFile(path, content, safety);
  try {
    await link(temp, path);
    if (safety === 'durable') await syncDirectory(dirname(path));
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    await unlink(temp).catch(() => undefined);
  }
}

/** The file's text, or undefined when it does not exist. */
export async function readTextIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
