// Which import specifiers reach into a dependency's private files. A package says what it
// publishes in its package.json `exports` map; a sub-path the map does not list (or maps to null)
// is internal, free to move or change in any release. A package without an `exports` map publishes
// its root only: its files are reachable, but nothing says which of them are meant to be used.
import { readFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { join } from 'node:path';
import ts from 'typescript';

/**
 * Every module specifier a source file names: static and dynamic imports, re-exports, require(),
 * type-only imports and `import('x').T` types, `declare module 'x'` blocks. TypeScript's own
 * pre-processor reads them, so strings and comments that merely look like imports do not count.
 */
export function importSpecifiers(source: string): string[] {
  const { importedFiles, ambientExternalModules } = ts.preProcessFile(source, true, true);
  return [...new Set([...importedFiles.map((file) => file.fileName), ...(ambientExternalModules ?? [])])];
}

/** The package a bare specifier names and the sub-path inside it ('.' for the package itself). */
export function splitSpecifier(specifier: string): { name: string; subpath: string } {
  const parts = specifier.split('/');
  const length = specifier.startsWith('@') ? 2 : 1;
  const rest = parts.slice(length).join('/');
  return { name: parts.slice(0, length).join('/'), subpath: rest === '' ? '.' : `./${rest}` };
}

/** Whether an `exports` field publishes `subpath` ('.' or './x'), as Node's resolver reads the map's keys. */
export function isExported(exportsField: unknown, subpath: string): boolean {
  if (exportsField === undefined || exportsField === null) return subpath === '.';
  if (typeof exportsField !== 'object' || Array.isArray(exportsField)) return subpath === '.';
  const map = exportsField as Record<string, unknown>;
  const keys = Object.keys(map);
  // An object of conditions ({ import, require, … }) is the export of '.' alone.
  if (!keys.some((key) => key.startsWith('.'))) return subpath === '.';
  if (subpath in map) return map[subpath] !== null;
  // Sub-path patterns ('./features/*'): the match with the longest prefix wins, as in Node.
  const matches = keys
    .filter((key) => {
      const star = key.indexOf('*');
      if (star === -1 || key.indexOf('*', star + 1) !== -1) return false;
      const [prefix, suffix] = [key.slice(0, star), key.slice(star + 1)];
      return subpath.length >= key.length && subpath.startsWith(prefix) && subpath.endsWith(suffix);
    })
    .sort((a, b) => b.indexOf('*') - a.indexOf('*') || b.length - a.length);
  const best = matches[0];
  return best !== undefined && map[best] !== null;
}

/** Reads a dependency's package.json `exports` field (from the project's node_modules). */
export function installedExports(root: string): (name: string) => unknown {
  return (name) => {
    const manifest = JSON.parse(readFileSync(join(root, 'node_modules', name, 'package.json'), 'utf8')) as {
      exports?: unknown;
    };
    return manifest.exports;
  };
}

/**
 * Why `specifier` reaches into a dependency's private files, or undefined when it does not:
 * relative and absolute paths, package.json `imports` (#…) and Node's built-ins are not
 * dependencies; a package's root and the sub-paths its `exports` lists are its public API.
 */
export function internalImport(specifier: string, exportsOf: (name: string) => unknown): string | undefined {
  if (/^(?:\.{1,2}\/|\/|#)/.test(specifier) || isBuiltin(specifier)) return undefined;
  const { name, subpath } = splitSpecifier(specifier);
  if (subpath === '.') return undefined;
  const exportsField = exportsOf(name);
  if (isExported(exportsField, subpath)) return undefined;
  return exportsField === undefined
    ? `${name} has no exports map: only "${name}" itself is its API`
    : `${name}'s exports map does not list "${subpath}"`;
}
