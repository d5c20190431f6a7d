// A temp install of the bundle the image runs: scripts/build.ts's whole build into <dir>/dist and
// config/ beside it, in a directory with no node_modules above it (as in the image).
import { cp } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Metafile } from 'esbuild';
import { buildBundle, type BundleFeatures } from '../../scripts/build.ts';
import { createTempDir } from './temp-dir.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));

export interface BundleInstall {
  dir: string;
  /** `<dir>/dist/cli/entry.js`. */
  entry: string;
  metafile: Metafile;
  /** Removes the install (call it in afterAll). */
  readonly remove: () => Promise<void>;
}

export async function installBundle(prefix: string, features: BundleFeatures = {}): Promise<BundleInstall> {
  const temp = await createTempDir(prefix);
  const dir = temp.path;
  try {
    const metafile = await buildBundle(join(dir, 'dist'), 'silent', features);
    await cp(join(root, 'config'), join(dir, 'config'), { recursive: true });
    return { dir, entry: join(dir, 'dist', 'cli', 'entry.js'), metafile, remove: temp.remove };
  } catch (error) {
    await temp.remove();
    throw error;
  }
}
