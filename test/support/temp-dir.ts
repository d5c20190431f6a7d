// A fresh temporary directory for each test of the calling describe block, removed after it.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach } from 'vitest';

/** Call inside a describe block; `path()` is this test's directory. */
export function useTempDir(prefix: string): { path: () => string } {
  let dir: string | undefined;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), prefix));
  });
  afterEach(async () => {
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });
  return {
    path: () => {
      if (dir === undefined) throw new Error('useTempDir: no test is running');
      return dir;
    },
  };
}
