// The first command installs only what the demo needs (issue 20 §7), and a person who then runs
// the tests in the same clone gets the dev dependencies without doing anything: keyroll_npm_ci
// (scripts/lib/node.sh) reads npm's record of the install to decide. A fake `npm` records the
// command instead of installing.
import { spawnSync } from 'node:child_process';
import { chmod, mkdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeEach, describe, expect, it } from 'vitest';
import { useTempDir } from '../support/temp-dir.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
let clone: string;

/** Leaves node_modules as `npm ci` would (with or without the dev packages), newer than the lockfile. */
async function installed(kind: 'full' | 'production'): Promise<void> {
  await mkdir(join(clone, 'node_modules'));
  const packages = {
    '': { name: 'keyroll' },
    'node_modules/zod': { version: '4.0.0' },
    ...(kind === 'full' ? { 'node_modules/vitest': { version: '5.0.0', dev: true } } : {}),
  };
  await writeFile(
    join(clone, 'node_modules', '.package-lock.json'),
    JSON.stringify({ lockfileVersion: 3, packages }, null, 2),
  );
  const past = new Date(Date.now() - 60_000);
  await utimes(join(clone, 'package-lock.json'), past, past);
}

/** Runs keyroll_npm_ci [mode] in the fake clone; returns the npm commands it ran. */
async function npmCi(mode?: 'production'): Promise<string[]> {
  const result = spawnSync(
    'sh',
    ['-c', `. "${join(root, 'scripts', 'lib', 'node.sh')}" && keyroll_npm_ci ${mode ?? ''}`],
    {
      cwd: clone,
      encoding: 'utf8',
      env: {
        PATH: `${join(clone, 'fake-bin')}:${dirname(process.execPath)}:/usr/bin:/bin`,
        HOME: clone,
        KEYROLL_CACHE: join(clone, 'cache'),
      },
    },
  );
  expect(result.status, result.stderr).toBe(0);
  const calls = await readFile(join(clone, 'npm-calls'), 'utf8').catch(() => '');
  return calls.split('\n').filter((line) => line !== '');
}

describe('keyroll_npm_ci', () => {
  const dir = useTempDir('keyroll-npm-install-');
  beforeEach(async () => {
    clone = dir.path();
    await mkdir(join(clone, 'fake-bin'));
    await writeFile(
      join(clone, 'fake-bin', 'npm'),
      `#!/bin/sh\necho "$*" >> "${join(clone, 'npm-calls')}"\n`,
    );
    await chmod(join(clone, 'fake-bin', 'npm'), 0o755);
    await writeFile(join(clone, 'package-lock.json'), '{}\n');
  });

  it('the demo on a fresh clone installs the production dependencies only, without the optional OpenTelemetry SDK', async () => {
    expect(await npmCi('production')).toEqual([expect.stringMatching(/^ci --omit=dev --omit=optional /)]);
  });

  it('the tests after the demo install the dev dependencies too', async () => {
    await installed('production');
    expect(await npmCi()).toEqual([expect.stringMatching(/^ci --include=dev /)]);
  });

  it('the demo after the tests installs nothing: a full install serves it', async () => {
    await installed('full');
    expect(await npmCi('production')).toEqual([]);
  });

  it('a second run of either installs nothing', async () => {
    await installed('production');
    expect(await npmCi('production')).toEqual([]);
    await rm(join(clone, 'node_modules'), { recursive: true });
    await installed('full');
    expect(await npmCi()).toEqual([]);
  });

  it('a lockfile newer than the install reinstalls, the same kind the caller needs', async () => {
    await installed('full');
    const future = new Date(Date.now() + 60_000);
    await utimes(join(clone, 'package-lock.json'), future, future);
    expect(await npmCi('production')).toEqual([expect.stringMatching(/^ci --omit=dev /)]);
    // The fake npm installed nothing, so the install is still older than the lockfile.
    expect((await npmCi())[1]).toMatch(/^ci --include=dev /);
  });
});
