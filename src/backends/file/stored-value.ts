// The value file as it is stored: read back and parsed in the target's shape, with its mtime (the
// version of a value whose write the sidecar has not recorded, or that someone edited by hand).
import type { Stats } from 'node:fs';
import { stat } from 'node:fs/promises';
import { parseStoredValue } from '../render.ts';
import type { StoredSecret, ValueShape } from '../types.ts';
import { readTextIfExists } from './atomic.ts';

/** The value stored at `file`, undefined when there is none or it does not parse in `shape`. */
export async function readStoredValue(
  file: string,
  shape: ValueShape,
): Promise<(StoredSecret & { mtimeMs: number }) | undefined> {
  const existing = await statIfExists(file);
  if (existing === undefined) return undefined;
  const text = await readTextIfExists(file);
  if (text === undefined) return undefined;
  const parsed = parseStoredValue(shape, text);
  if (parsed === undefined) return undefined;
  return { ...parsed, mtimeMs: existing.mtimeMs };
}

export async function statIfExists(path: string): Promise<Stats | undefined> {
  try {
    return await stat(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
