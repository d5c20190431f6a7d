// Where a tenant may write in a ClusterKeyStore: under the `pathPrefix` of a condition that
// admits its namespace. A path is judged after the tricks that would make a backend read it
// elsewhere are undone: percent-encoding (decoded until it stops changing: `%252e` is `%2e` is
// `.`), backslashes, empty segments (`//`, a leading `/`), `.` and `..`. Vault's HTTP path, the
// WHATWG URL parser and a file backend's directory all resolve those, so checking the text as
// written would let `teams/billing/../payments/x` through. A path that stays under its prefix but
// is not written in that normal form is refused too: what was checked is then what is written.

export type PathVerdict =
  { ok: true } | { ok: false; reason: 'PathOutsidePrefix' | 'PathNotCanonical'; message: string };

/** The normal form of `path`, or undefined when it climbs above the root or cannot be decoded. */
export function normalisePath(path: string): string | undefined {
  let decoded = path;
  for (let round = 0; round < 8; round += 1) {
    let next: string;
    try {
      next = decodeURIComponent(decoded);
    } catch {
      return undefined;
    }
    if (next === decoded) break;
    decoded = next;
  }
  // A control character (NUL above all) ends a path early in some clients: nothing to normalise.
  for (let at = 0; at < decoded.length; at += 1) {
    const code = decoded.charCodeAt(at);
    if (code < 0x20 || code === 0x7f) return undefined;
  }
  const segments: string[] = [];
  for (const segment of decoded.replaceAll('\\', '/').split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      if (segments.pop() === undefined) return undefined;
      continue;
    }
    segments.push(segment);
  }
  return segments.join('/');
}

/** The condition's prefix for `namespace`: `{namespace}` expanded, then normalised like a path. */
export function expandPrefix(pathPrefix: string, namespace: string): { prefix: string; directory: boolean } {
  const expanded = pathPrefix.replaceAll('{namespace}', namespace);
  // A prefix ending in `/` is a directory (`teams/billing/` admits `teams/billing/x`, never
  // `teams/billing-evil/x`); one without is a plain string prefix, as the platform team wrote it.
  return { prefix: normalisePath(expanded) ?? '', directory: expanded.endsWith('/') };
}

/** Whether `path` may be written by `namespace` under `pathPrefix`. */
export function checkPath(path: string, pathPrefix: string, namespace: string): PathVerdict {
  const normal = normalisePath(path);
  const { prefix, directory } = expandPrefix(pathPrefix, namespace);
  const under =
    normal !== undefined &&
    (directory
      ? prefix === '' || (normal.startsWith(`${prefix}/`) && normal.length > prefix.length + 1)
      : normal.startsWith(prefix) && normal.length > prefix.length);
  if (!under) {
    return {
      ok: false,
      reason: 'PathOutsidePrefix',
      message: `path ${JSON.stringify(path)} is not under ${JSON.stringify(directory && prefix !== '' ? `${prefix}/` : prefix)}, the prefix this store admits the namespace under`,
    };
  }
  if (normal !== path) {
    return {
      ok: false,
      reason: 'PathNotCanonical',
      message: `path ${JSON.stringify(path)} must be written in its plain form ${JSON.stringify(normal)} (no "..", ".", "//", leading "/", "\\" or percent-encoding)`,
    };
  }
  return { ok: true };
}
