// `keyroll demo --dir X` wipes X before each run (issue 12 §7): only a directory that is new,
// empty, or marked as made by an earlier demo; anything else is refused and left untouched.
import { mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEMO_DIR_MARKER, prepareDemoDir } from '../../src/cli/demo.ts';
import { useTempDir } from '../support/temp-dir.ts';
import { spawnCli } from './harness.ts';

const root = useTempDir('keyroll-demo-dir-');

describe('prepareDemoDir', () => {
  it('creates a new directory and marks it', async () => {
    const dir = join(root.path(), 'new', 'demo');
    expect(await prepareDemoDir(dir)).toBeUndefined();
    expect(await readdir(dir)).toEqual([DEMO_DIR_MARKER]);
  });

  it('takes an empty directory and marks it', async () => {
    const dir = join(root.path(), 'empty');
    await mkdir(dir);
    expect(await prepareDemoDir(dir)).toBeUndefined();
    expect(await readdir(dir)).toEqual([DEMO_DIR_MARKER]);
  });

  it('wipes a directory an earlier demo marked, keeping the mark', async () => {
    const dir = join(root.path(), 'demo');
    await prepareDemoDir(dir);
    await mkdir(join(dir, 'secrets'));
    await writeFile(join(dir, 'secrets', 'billing.json'), '{}');
    expect(await prepareDemoDir(dir)).toBeUndefined();
    expect(await readdir(dir)).toEqual([DEMO_DIR_MARKER]);
  });

  it('refuses a non-empty directory keyroll did not make, and touches nothing in it', async () => {
    const dir = join(root.path(), 'home');
    await mkdir(join(dir, 'projects'), { recursive: true });
    await writeFile(join(dir, 'notes.txt'), 'precious');
    expect(await prepareDemoDir(dir)).toBe(
      `is not empty and was not made by keyroll demo (it has no ${DEMO_DIR_MARKER}); the demo wipes its directory, so give a new or empty one`,
    );
    expect((await readdir(dir)).sort()).toEqual(['notes.txt', 'projects']);
    expect(await readFile(join(dir, 'notes.txt'), 'utf8')).toBe('precious');
  });

  it('refuses a file and a symbolic link', async () => {
    await writeFile(join(root.path(), 'file'), 'x');
    await mkdir(join(root.path(), 'target'));
    await symlink(join(root.path(), 'target'), join(root.path(), 'link'));
    expect(await prepareDemoDir(join(root.path(), 'file'))).toBe(
      'is not a directory; give a new or empty directory',
    );
    expect(await prepareDemoDir(join(root.path(), 'link'))).toBe(
      'is not a directory; give a new or empty directory',
    );
  });
});

describe('keyroll demo --dir', () => {
  it('exits 2 on a foreign non-empty directory before starting anything, and leaves it as it was', async () => {
    const dir = join(root.path(), 'work');
    await mkdir(dir);
    await writeFile(join(dir, 'thesis.tex'), 'years of work');
    const result = await spawnCli(['demo', '--dir', 'work'], root.path()).result;
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('keyroll demo: --dir work is not empty and was not made by keyroll demo');
    expect(result.stdout).not.toContain('emulator at');
    expect(await readdir(dir)).toEqual(['thesis.tex']);
  });
});
