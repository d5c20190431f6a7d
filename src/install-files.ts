// keyroll's own files that ship beside the code (config/: the demo policy, the emulator seed).
// A module's depth differs between the sources (src/cli/demo.ts) and the bundle the image runs
// (dist/cli/chunks/demo-….js), so a fixed '../../config' from import.meta.url would point at
// dist/config in the image: the nearest ancestor directory that holds config/ is the install.
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The absolute path of `relative` (e.g. `config/demo-policy.yaml`) in keyroll's installation. */
export function installedFile(relative: string): string {
  const start = dirname(fileURLToPath(import.meta.url));
  for (let dir = start; ; dir = dirname(dir)) {
    if (existsSync(join(dir, 'config', 'emulator-seed.yaml'))) return join(dir, relative);
    if (dirname(dir) === dir) break;
  }
  // Not installed beside its config/ (a copied bundle): the caller's read names the missing path.
  return join(start, '..', '..', relative);
}
