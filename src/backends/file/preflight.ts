// The file preflight (invariant 1): before the roll, prove without touching the value that the
// directory takes a new file (the atomic write needs exactly that), that an existing value is a
// regular file keyroll may read and write, and that the bookkeeping beside it reads.
import { access, constants, mkdir, open, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { PreflightResult, StoreTarget } from '../types.ts';
import { DIRECTORY_MODE, tempPathFor } from './atomic.ts';
import { invalidTargetError } from './errors.ts';
import { readSidecar } from './records.ts';
import { statIfExists } from './stored-value.ts';

export async function preflight(
  backend: string,
  file: string,
  target: StoreTarget,
): Promise<PreflightResult> {
  const checks: string[] = [];
  await mkdir(dirname(file), { recursive: true, mode: DIRECTORY_MODE });
  // Prove the directory takes a new file (the atomic write needs exactly that), then remove it.
  const probe = tempPathFor(file);
  const handle = await open(probe, 'wx', 0o600);
  await handle.close();
  await unlink(probe);
  checks.push(`directory ${dirname(file)} writable`);
  const existing = await statIfExists(file);
  if (existing !== undefined) {
    if (!existing.isFile())
      throw invalidTargetError(backend, 'preflight', target.path, 'is not a regular file');
    await access(file, constants.R_OK | constants.W_OK);
    checks.push(`${file} readable and writable`);
  }
  await readSidecar(file);
  checks.push('bookkeeping readable');
  return { exists: existing !== undefined, checks };
}
