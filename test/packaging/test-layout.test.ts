// test/ mirrors src/ folder for folder (docs/layout.md, "Where the tests live"): the tests of
// src/<folder>/<file>.ts sit in test/<folder>/, named <file>.test.ts when they test that one file,
// so whoever changes a file finds its tests at the same path. Only the cross-cutting folders have
// no src/ counterpart.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** What spans many folders of src/: real servers, the fault matrix, shipped artefacts, shared helpers and data. */
const CROSS_CUTTING = ['integration', 'faults', 'packaging', 'support', 'fixtures'] as const;

function testFiles(): string[] {
  return readdirSync(join(root, 'test'), { recursive: true, encoding: 'utf8' })
    .map((path) => path.split('\\').join('/'))
    .filter((path) => path.endsWith('.test.ts'))
    .sort();
}

const crossCutting = (path: string): boolean => CROSS_CUTTING.some((folder) => path.startsWith(`${folder}/`));

describe('test/ mirrors src/', () => {
  it('every test file outside the cross-cutting folders sits in a folder that src/ has', () => {
    const misplaced = testFiles()
      .filter((path) => !crossCutting(path))
      .filter((path) => {
        const folder = join(root, 'src', dirname(path));
        return !existsSync(folder) || !statSync(folder).isDirectory();
      })
      .map((path) => `test/${path} (no src/${dirname(path)}/)`);
    expect(misplaced, 'move each test to the test/ folder of the src/ folder it tests').toEqual([]);
  });

  it('the cross-cutting folders are not folders of src/ (a test there would look mirrored and is not)', () => {
    expect(CROSS_CUTTING.filter((folder) => existsSync(join(root, 'src', folder)))).toEqual([]);
  });
});
