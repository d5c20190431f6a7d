// Where a file target lives: always inside the backend's directory. A path that climbs out
// (`..`, an absolute path) is refused before any file is touched, so a policy typo cannot
// overwrite an arbitrary file on the host. Symlinks inside the directory are the operator's
// own choice and are followed.
import { isAbsolute, relative, resolve, sep } from 'node:path';

/** The absolute value-file path for `targetPath`, or undefined when it leaves `directory`. */
export function resolveInside(directory: string, targetPath: string): string | undefined {
  if (targetPath === '' || isAbsolute(targetPath) || targetPath.includes('\0')) return undefined;
  const base = resolve(directory);
  const full = resolve(base, targetPath);
  const rel = relative(base, full);
  if (rel === '' || rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) return undefined;
  // keyroll's own bookkeeping files next to a value are not targets themselves.
  if (
    /\.keyroll\.(json|lock)(\.takeover|\.guard)?$/.test(full) ||
    /\.keyroll\.(current|previous)$/.test(full)
  )
    return undefined;
  // The takeover guard's draft and a stale holder's directory moved aside (takeover-guard.ts).
  if (/\.keyroll\.lock\.takeover\.[0-9a-f]+\.(draft|stale)$/.test(full)) return undefined;
  return full;
}
