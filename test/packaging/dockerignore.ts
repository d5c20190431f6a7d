// Reads .dockerignore the way BuildKit applies it to the build context: patterns are relative
// to the context root, `*` and `?` stay within one path segment, `**` spans any number of
// segments, `!` re-includes, the last matching pattern wins, and a pattern that matches a
// directory covers everything below it.

export interface IgnoreRule {
  negate: boolean;
  pattern: string;
  regex: RegExp;
}

function globToRegex(pattern: string): RegExp {
  let source = '';
  for (let i = 0; i < pattern.length; i++) {
    const char = pattern[i]!;
    if (char === '*' && pattern[i + 1] === '*') {
      // `**/` matches zero or more whole directories; a trailing `**` matches anything.
      if (pattern[i + 2] === '/') {
        source += '(?:.*/)?';
        i += 2;
      } else {
        source += '.*';
        i += 1;
      }
    } else if (char === '*') {
      source += '[^/]*';
    } else if (char === '?') {
      source += '[^/]';
    } else {
      source += char.replace(/[.+^${}()|[\]\\]/g, '\\$&');
    }
  }
  return new RegExp(`^${source}$`);
}

export function parseDockerignore(text: string): IgnoreRule[] {
  return text
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const negate = line.startsWith('!');
      const pattern = (negate ? line.slice(1) : line).trim().replace(/^\/+/, '').replace(/\/+$/, '');
      return { negate, pattern, regex: globToRegex(pattern) };
    });
}

/** True when `path` (relative to the context root, `/`-separated) is left out of the context. */
export function isIgnored(rules: readonly IgnoreRule[], path: string): boolean {
  const segments = path.split('/');
  const candidates = segments.map((_, index) => segments.slice(0, index + 1).join('/'));
  let ignored = false;
  for (const rule of rules) {
    if (candidates.some((candidate) => rule.regex.test(candidate))) ignored = !rule.negate;
  }
  return ignored;
}
