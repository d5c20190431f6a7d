// The bundle the container image ships (`npm run build -- --without-emulator`, the Dockerfile's
// build) leaves the API emulator and its unauthenticated fault routes out (issue 12 §7): no file
// of src/emulator/ nor fastify is in it, and `keyroll emulator` / `keyroll demo` say so and exit 2.
// `npm run build` (test/packaging/bundle.test.ts) still carries the emulator for the demo.
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cp } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Metafile } from 'esbuild';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildBundle } from '../../scripts/build.ts';
import { parseDockerfile } from '../../scripts/lib/dockerfile.ts';
import { useTempDir } from '../support/temp-dir.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const installDir = useTempDir('keyroll-image-bundle-', 'file');
let install: string;
let metafile: Metafile;

beforeAll(async () => {
  install = installDir.path();
  metafile = await buildBundle(join(install, 'dist'), 'silent', { emulator: false });
  await cp(join(root, 'config'), join(install, 'config'), { recursive: true });
}, 60_000);

const run = (...args: string[]): SpawnSyncReturns<string> =>
  spawnSync(process.execPath, [join(install, 'dist', 'cli', 'entry.js'), ...args], {
    cwd: install,
    encoding: 'utf8',
    timeout: 60_000,
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: install, TMPDIR: install },
  });

describe('the image bundle (--without-emulator)', () => {
  it('holds no file of src/emulator/ and no fastify', () => {
    const inputs = Object.values(metafile.outputs).flatMap((output) => Object.keys(output.inputs));
    expect(
      inputs.filter((input) => input.includes('src/emulator/') || input.includes('node_modules/fastify/')),
    ).toEqual([]);
    expect(inputs).toContain('src/cli/demo.ts');
  });

  it('keyroll emulator and keyroll demo say they are not in this build and exit 2, starting nothing', () => {
    for (const command of ['emulator', 'demo']) {
      const result = run(command);
      expect(result.status, command).toBe(2);
      expect(result.stderr).toContain(
        `keyroll ${command} is not in this build: the container image leaves the API emulator (and its unauthenticated fault routes) out.`,
      );
      expect(result.stdout).toBe('');
    }
  });

  it('still runs the rest of the CLI (validate --offline on the demo policy)', () => {
    const result = run('validate', '--offline', '-p', join(install, 'config', 'demo-policy.yaml'));
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it('is the build the Dockerfile runs', () => {
    const dockerfile = parseDockerfile(readFileSync(join(root, 'Dockerfile'), 'utf8'));
    const builds = dockerfile.stages
      .flatMap((stage) => stage.instructions)
      .filter((i) => i.keyword === 'RUN' && i.args.includes('npm run build'));
    expect(builds.map((i) => i.args)).toEqual(['npm run build -- --without-emulator']);
  });
});
