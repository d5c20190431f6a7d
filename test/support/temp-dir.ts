// Temporary directories for tests, each removed with everything in it when its test (or test
// file, or the bench that owns it) is done, so no run leaves files behind in the system's temp
// directory. Every test and helper makes its directories here, never with mkdtemp by hand.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';

export interface TempDir {
  readonly path: string;
  /** Removes the directory and everything in it; calling it again does nothing. */
  readonly remove: () => Promise<void>;
}

/**
 * A fresh directory under the system's temp directory, named `<prefix><random>`. For helpers that
 * own a directory for their own lifetime (a bench, a server); the owner calls `remove()` when it
 * closes, in a `finally` or an `afterEach`.
 */
export async function createTempDir(prefix: string): Promise<TempDir> {
  const path = await mkdtemp(join(tmpdir(), prefix));
  return { path, remove: () => rm(path, { recursive: true, force: true }) };
}

/**
 * Call inside a describe block (or at the top of a file): a fresh directory for each test
 * (`scope: 'test'`), or one for all the tests of the block (`scope: 'file'`), removed after it.
 * Call it before the block's own hooks that use `path()`: its directory then exists when they
 * run, and is removed after their cleanup.
 */
export function useTempDir(prefix: string, scope: 'test' | 'file' = 'test'): { path: () => string } {
  let dir: TempDir | undefined;
  const [before, after] = scope === 'test' ? [beforeEach, afterEach] : [beforeAll, afterAll];
  before(async () => {
    dir = await createTempDir(prefix);
  });
  after(async () => {
    await dir?.remove();
    dir = undefined;
  });
  return {
    path: () => {
      if (dir === undefined) throw new Error('useTempDir: no test of its block is running');
      return dir.path;
    },
  };
}
