// No file under src/ or scripts/ imports a dependency's private files (issue 14 §3): what a
// package does not publish in its `exports` map can move or change in any release, and code that
// leans on it breaks on an update with no warning. A static scan of every import specifier, which
// also holds src/ to the production dependencies (`./scripts/demo.sh` installs only those).
import { readdirSync, readFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  importSpecifiers,
  installedExports,
  internalImport,
  isExported,
  splitSpecifier,
} from './package-imports.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const exportsOf = installedExports(root);

/** The JavaScript and TypeScript files under a folder of the repository, relative to its root. */
function sourceFiles(folder: string): string[] {
  return readdirSync(join(root, folder), { recursive: true, encoding: 'utf8' })
    .filter((path) => /\.[cm]?[jt]s$/.test(path))
    .map((path) => join(folder, path))
    .sort();
}

describe('imports of dependencies', () => {
  it('no file under src/ or scripts/ imports a sub-path a dependency does not publish', () => {
    const files = [...sourceFiles('src'), ...sourceFiles('scripts')];
    expect(files.length).toBeGreaterThan(100);
    const seen = new Set<string>();
    const internal: string[] = [];
    for (const file of files) {
      for (const specifier of importSpecifiers(readFileSync(join(root, file), 'utf8'))) {
        seen.add(specifier);
        const reason = internalImport(specifier, exportsOf);
        if (reason !== undefined) internal.push(`${file}: '${specifier}' (${reason})`);
      }
    }
    // The scan reads real imports (not a silent pass over nothing).
    expect([...seen]).toEqual(expect.arrayContaining(['undici', 'zod', 'esbuild', 'node:fs/promises']));
    expect(internal).toEqual([]);
  });

  it('no file under src/ imports a package outside `dependencies`: ./scripts/demo.sh installs those alone; the optional OpenTelemetry SDK only from src/tracing/otel/', () => {
    const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      optionalDependencies: Record<string, string>;
    };
    const outside: string[] = [];
    let optionalSeen = 0;
    for (const file of sourceFiles('src')) {
      for (const specifier of importSpecifiers(readFileSync(join(root, file), 'utf8'))) {
        if (/^(?:\.{1,2}\/|\/|#)/.test(specifier) || isBuiltin(specifier)) continue;
        const { name } = splitSpecifier(specifier);
        if (name in manifest.dependencies) continue;
        if (name in manifest.optionalDependencies && file.startsWith(join('src', 'tracing', 'otel')))
          optionalSeen++;
        else outside.push(`${file}: '${specifier}'`);
      }
    }
    expect(outside).toEqual([]);
    expect(optionalSeen).toBeGreaterThan(0);
  });

  it('src/tracing/otel/ (the OpenTelemetry SDK) is reached only by the dynamic import in src/tracing/start.ts: a cold start with tracing off loads none of it', () => {
    const otel = join('src', 'tracing', 'otel');
    const reaching: string[] = [];
    for (const file of sourceFiles('src').filter((path) => !path.startsWith(otel))) {
      const source = readFileSync(join(root, file), 'utf8');
      if (!importSpecifiers(source).some((specifier) => specifier.includes('/otel/'))) continue;
      const statics = [...source.matchAll(/^\s*(?:import|export)\b[^;]*?from\s*'([^']+)'/gm)].map(
        (match) => match[1] ?? '',
      );
      reaching.push(
        ...statics
          .filter((specifier) => specifier.includes('/otel/'))
          .map((specifier) => `${file}: static '${specifier}'`),
      );
      if (file !== join('src', 'tracing', 'start.ts')) reaching.push(`${file}: reaches otel/`);
    }
    expect(reaching).toEqual([]);
  });

  it('flags what src/http/undici.ts used to import (undici publishes its root only), and passes the root, listed sub-paths and built-ins', () => {
    const source = [
      "import AgentImpl from 'undici/lib/dispatcher/agent.js';",
      "import type * as Undici from 'undici';",
      "import { z } from 'zod/mini';",
      "import { constants } from 'node:http2';",
      "import { helper } from '../http/body.ts';",
      "declare module 'undici/lib/core/util.js' { const util: unknown; export default util; }",
      "const lazy = await import('@aws-sdk/client-secrets-manager/dist-cjs/index.js');",
      "// import 'yaml/dist/private.js' (a comment, not an import)",
    ].join('\n');
    const flagged = importSpecifiers(source).filter(
      (specifier) => internalImport(specifier, exportsOf) !== undefined,
    );
    expect(flagged.sort()).toEqual([
      '@aws-sdk/client-secrets-manager/dist-cjs/index.js',
      'undici/lib/core/util.js',
      'undici/lib/dispatcher/agent.js',
    ]);
  });

  it('reads an exports map as Node does: listed keys, patterns (longest prefix wins), null exclusions, conditions-only maps', () => {
    const map = {
      '.': './index.js',
      './mini': { import: './mini.js' },
      './features/*': './f/*.js',
      './features/private/*': null,
      './package.json': './package.json',
    };
    expect(isExported(map, './mini')).toBe(true);
    expect(isExported(map, './features/a')).toBe(true);
    expect(isExported(map, './features/private/a')).toBe(false);
    expect(isExported(map, './lib/index.js')).toBe(false);
    expect(isExported({ import: './index.js', require: './index.cjs' }, './lib/x.js')).toBe(false);
    expect(isExported('./index.js', './index.js')).toBe(false);
    expect(isExported(undefined, './lib/x.js')).toBe(false);
  });
});
