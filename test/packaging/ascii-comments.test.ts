// scripts/build.ts asciiComments: blanks characters beyond ASCII in the bundle's comments, and
// refuses to touch one anywhere else (a regex literal, a tagged template), where '?' would change
// what the code does.
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Metafile } from 'esbuild';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { asciiComments } from '../../scripts/build.ts';

describe('asciiComments', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'keyroll-ascii-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const metafileFor = (...names: string[]): Metafile => ({ inputs: {}, outputs: Object.fromEntries(names.map((name) => [name, { bytes: 0, inputs: {}, imports: [], exports: [] }])) });

  it('blanks them in comments, column for column, and leaves ASCII files alone', async () => {
    await writeFile(join(dir, 'a.js'), '// nothing is a multiple of zero \u2014 see 𝑊\nexport const a = "\\u2014";\n');
    await writeFile(join(dir, 'b.js'), 'export const b = 1;\n');
    expect(await asciiComments(metafileFor('a.js', 'b.js'), `${dir}/`)).toEqual(['a.js']);
    expect(await readFile(join(dir, 'a.js'), 'utf8')).toBe('// nothing is a multiple of zero ? see ??\nexport const a = "\\u2014";\n');
    expect(await readFile(join(dir, 'b.js'), 'utf8')).toBe('export const b = 1;\n');
  });

  it('fails the build for one in a regex literal or a tagged template, and leaves the file as it was', async () => {
    for (const code of ['export const dash = /[\u2013\u2014]/;\n', 'export const raw = String.raw`caf\u00e9`;\n']) {
      await writeFile(join(dir, 'c.js'), code);
      await expect(asciiComments(metafileFor('c.js'), `${dir}/`)).rejects.toThrow(/outside a comment/);
      expect(await readFile(join(dir, 'c.js'), 'utf8')).toBe(code);
    }
  });
});
