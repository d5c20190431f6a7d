// scripts/build.ts asciiComments: blanks characters beyond ASCII in the bundle's comments, and
// refuses to touch one anywhere else (a regex literal, a tagged template), where '?' would change
// what the code does.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Metafile } from 'esbuild';
import { describe, expect, it } from 'vitest';
import { asciiComments } from '../../scripts/build.ts';
import { useTempDir } from '../support/temp-dir.ts';

describe('asciiComments', () => {
  const temp = useTempDir('keyroll-ascii-');

  const metafileFor = (...names: string[]): Metafile => ({ inputs: {}, outputs: Object.fromEntries(names.map((name) => [name, { bytes: 0, inputs: {}, imports: [], exports: [] }])) });

  it('blanks them in comments, column for column, and leaves ASCII files alone', async () => {
    await writeFile(join(temp.path(), 'a.js'), '// nothing is a multiple of zero \u2014 see 𝑊\nexport const a = "\\u2014";\n');
    await writeFile(join(temp.path(), 'b.js'), 'export const b = 1;\n');
    expect(await asciiComments(metafileFor('a.js', 'b.js'), `${temp.path()}/`)).toEqual(['a.js']);
    expect(await readFile(join(temp.path(), 'a.js'), 'utf8')).toBe('// nothing is a multiple of zero ? see ??\nexport const a = "\\u2014";\n');
    expect(await readFile(join(temp.path(), 'b.js'), 'utf8')).toBe('export const b = 1;\n');
  });

  it('fails the build for one in a regex literal or a tagged template, and leaves the file as it was', async () => {
    for (const code of ['export const dash = /[\u2013\u2014]/;\n', 'export const raw = String.raw`caf\u00e9`;\n']) {
      await writeFile(join(temp.path(), 'c.js'), code);
      await expect(asciiComments(metafileFor('c.js'), `${temp.path()}/`)).rejects.toThrow(/outside a comment/);
      expect(await readFile(join(temp.path(), 'c.js'), 'utf8')).toBe(code);
    }
  });
});
