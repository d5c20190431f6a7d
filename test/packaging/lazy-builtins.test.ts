// The stand-ins scripts/build.ts puts in the bundle for built-in modules a dependency loads on
// start for features keyroll's start does not use (LAZY_BUILTINS). Each must give the dependency everything it reads
// of the real module, with the real values, and load the real module when it is used after all.
import { once } from 'node:events';
import { constants as realHttp2Constants, type ClientHttp2Session } from 'node:http2';
import { readFile, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { HTTP2_CONSTANTS_USED_BY_UNDICI, LAZY_BUILTINS } from '../../scripts/build.ts';
import { useTempDir } from '../support/temp-dir.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const stubFor = (module: string): (typeof LAZY_BUILTINS)[number] => {
  const stub = LAZY_BUILTINS.find((entry) => entry.module === module);
  if (stub === undefined) throw new Error(`no stand-in for ${module}`);
  return stub;
};
const membersUsed = (source: string, name: string): string[] => [...new Set([...source.matchAll(new RegExp(`\\b${name}\\.(\\w+)`, 'g'))].map((m) => m[1] ?? ''))].sort();

describe('lazy built-in stand-ins in the bundle', () => {
  const temp = useTempDir('keyroll-lazy-');

  it('node:http2 for undici: the constants client-h2.js reads, with node:http2’s own values, and connect', async () => {
    const source = await readFile(join(root, 'node_modules/undici/lib/dispatcher/client-h2.js'), 'utf8');
    const destructured = /const \{\s*constants: \{([^}]*)\}\s*\} = http2/.exec(source)?.[1];
    expect(destructured, 'client-h2.js reads constants from node:http2').toBeDefined();
    const names = (destructured ?? '').split(',').map((name) => name.trim()).filter((name) => name !== '');
    expect(Object.keys(HTTP2_CONSTANTS_USED_BY_UNDICI).sort()).toEqual(names.sort());
    for (const name of names) expect(HTTP2_CONSTANTS_USED_BY_UNDICI[name as keyof typeof HTTP2_CONSTANTS_USED_BY_UNDICI], name).toBe(realHttp2Constants[name as keyof typeof realHttp2Constants]);
    expect(membersUsed(source, 'http2')).toEqual(['connect']);

    const file = join(temp.path(), 'http2-stub.cjs');
    await writeFile(file, stubFor('node:http2').contents);
    const stub = createRequire(import.meta.url)(file) as { constants: Record<string, unknown>; connect: (authority: string) => ClientHttp2Session };
    expect(stub.constants).toEqual(HTTP2_CONSTANTS_USED_BY_UNDICI);
    const session = stub.connect('http://127.0.0.1:9');
    session.on('error', () => undefined);
    expect(session.constructor.name).toBe('ClientHttp2Session');
    session.destroy();
  });

  it('node:child_process for commander: spawn, the only member command.js uses, runs the real one', async () => {
    const source = await readFile(join(root, 'node_modules/commander/lib/command.js'), 'utf8');
    expect(source).toMatch(/^import childProcess from 'node:child_process';$/m);
    expect(membersUsed(source, 'childProcess')).toEqual(['spawn']);

    const file = join(temp.path(), 'child-process-stub.mjs');
    // The bundle's banner gives every chunk a require(); the stand-in relies on it.
    await writeFile(file, `import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);\n${stubFor('node:child_process').contents}\n`);
    const { default: childProcess } = (await import(pathToFileURL(file).href)) as { default: { spawn: (command: string, args: string[]) => ChildProcess } };
    const child = childProcess.spawn(process.execPath, ['-e', 'process.exit(7)']);
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(7);
  });
});
