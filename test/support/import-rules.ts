// The rules of .dependency-cruiser.js run as `npm run lint:imports` runs them, over a small tree
// a test writes, so each case of the rules' tests shows one thing they allow or refuse.
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { cruise, type IConfiguration, type ICruiseResult } from 'dependency-cruiser';
import { expect } from 'vitest';
import { useTempDir } from './temp-dir.ts';

// The config is plain JavaScript with JSDoc types; a specifier held in a variable keeps tsc from
// looking for a declaration file, and the cast says what the JSDoc says.
const CONFIG = new URL('../../.dependency-cruiser.js', import.meta.url).href;
const config = ((await import(CONFIG)) as { default: IConfiguration }).default;

/**
 * Call inside a describe block (or at the top of a file): a fresh tree per test, and a function
 * that writes `files` (path -> source) into it and returns the names of `rules` each file breaks,
 * cruising `roots`.
 */
export function useImportRules(
  prefix: string,
  rules: readonly string[],
  roots: readonly string[],
): (files: Record<string, string>) => Promise<Record<string, string[]>> {
  const tree = useTempDir(prefix);
  return async (files) => {
    for (const [path, source] of Object.entries(files)) {
      await mkdir(dirname(join(tree.path(), path)), { recursive: true });
      await writeFile(join(tree.path(), path), source);
    }
    const forbidden = (config.forbidden ?? []).filter((rule) => rules.includes(rule.name ?? ''));
    expect(forbidden.map((rule) => rule.name)).toEqual(rules);
    const result = await cruise([...roots], {
      baseDir: tree.path(),
      validate: true,
      ruleSet: { forbidden },
      tsPreCompilationDeps: true,
      enhancedResolveOptions: { extensions: ['.ts'] },
    });
    const found: Record<string, string[]> = {};
    for (const violation of (result.output as ICruiseResult).summary.violations)
      (found[violation.from] ??= []).push(violation.rule.name);
    return found;
  };
}
