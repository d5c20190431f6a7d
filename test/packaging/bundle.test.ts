// The bundle the image runs (scripts/build.ts): built into a temp directory by the same build as
// `npm run build` (buildBundle), then run from a directory with no node_modules above it, as in the
// image (which ships no node_modules). Proves the bundle is whole, finds config/ beside dist/,
// and keeps what `rotate` never needs out of the chunks every start loads.
import { spawn, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { mkdir } from 'node:fs/promises';
import { isBuiltin } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Metafile } from 'esbuild';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { imageNodeFlags } from '../support/image-runtime.ts';
import { externalImports } from '../../scripts/build.ts';
import { installBundle } from '../support/bundle-install.ts';
import { onlySpan, otlpEnv, startOtlpReceiver } from '../support/otlp-receiver.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** Every input of the chunks reachable from `output` through static imports (loaded at start). */
function loadedAtStart(metafile: Metafile, output: string): Set<string> {
  const inputs = new Set<string>();
  const seen = new Set<string>();
  const visit = (name: string): void => {
    if (seen.has(name)) return;
    seen.add(name);
    const chunk = metafile.outputs[name];
    if (!chunk) return;
    for (const input of Object.keys(chunk.inputs)) inputs.add(input);
    for (const imported of chunk.imports)
      if (imported.kind === 'import-statement' && !imported.external) visit(imported.path);
  };
  visit(output);
  return inputs;
}

describe('the bundled CLI (dist/, what the image runs)', () => {
  let install: string;
  let metafile: Metafile;
  let remove: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    ({ dir: install, metafile, remove } = await installBundle('keyroll-bundle-'));
    await mkdir(join(install, 'work'));
  }, 60_000);

  afterAll(async () => {
    await remove?.();
  });

  /** Runs `node [nodeArgs] <script> [args]` (the entry by default) from the install's work dir. */
  const node = (
    nodeArgs: string[],
    args: string[],
    env: Record<string, string> = {},
    script = join(install, 'dist', 'cli', 'entry.js'),
  ): SpawnSyncReturns<string> =>
    spawnSync(process.execPath, [...nodeArgs, script, ...args], {
      cwd: join(install, 'work'),
      encoding: 'utf8',
      timeout: 60_000,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: install, TMPDIR: install, ...env },
    });
  const run = (...args: string[]): SpawnSyncReturns<string> => node([], args);
  /** The entry as a child that does not block this process (a loopback server here must answer it). */
  const nodeAsync = (
    args: string[],
    env: Record<string, string>,
  ): Promise<{ status: number | null; stderr: string }> =>
    new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [join(install, 'dist', 'cli', 'entry.js'), ...args], {
        cwd: join(install, 'work'),
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: install, TMPDIR: install, ...env },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
      child.on('error', reject);
      child.on('close', (status) => {
        resolve({ status, stderr });
      });
    });

  it('imports nothing at run time but Node built-in modules', () => {
    const external = externalImports(metafile);
    expect(external.length).toBeGreaterThan(0);
    expect(external.filter((path) => !isBuiltin(path))).toEqual([]);
  });

  it('runs the demo (emulator, file backend, rotation) with no node_modules anywhere above it', () => {
    const demo = run('demo');
    expect(demo.stderr).not.toMatch(/Cannot find (?:module|package)/);
    expect(demo.status).toBe(0);
    expect(demo.stdout).toContain('rotated 4, failed 0, skipped 0');
  });

  it('runs on the compile cache scripts/warm-compile-cache.js fills, as the image does: every chunk it loads comes from the cache', () => {
    const flags = imageNodeFlags();
    const cache = { NODE_COMPILE_CACHE: join(install, 'compile-cache') };
    const warm = node(
      flags,
      [join(install, 'dist', 'cli')],
      cache,
      join(root, 'scripts', 'warm-compile-cache.js'),
    );
    expect(warm.status, warm.stderr).toBe(0);
    expect(warm.stderr).toMatch(/warm-compile-cache: \d+ chunks of /);
    const demo = node(flags, ['demo'], { ...cache, NODE_DEBUG_NATIVE: 'COMPILE_CACHE' });
    expect(demo.stdout).toContain('rotated 4, failed 0, skipped 0');
    const chunkLines = demo.stderr
      .split('\n')
      .filter((line) => /V8 code cache for ESM \S+\/chunks\//.test(line));
    expect(chunkLines.length).toBeGreaterThan(10);
    expect(chunkLines.filter((line) => !line.includes('was accepted'))).toEqual([]);
  });

  it('traces from the bundle when OTEL_EXPORTER_OTLP_ENDPOINT is set: the run span of a rotate that exits 2 reaches the collector', async () => {
    const otlp = await startOtlpReceiver();
    try {
      const rotate = await nodeAsync(['rotate', '-p', 'missing.yaml', '--all'], otlpEnv(otlp));
      expect(rotate.status).toBe(2);
      expect(rotate.stderr).not.toContain('tracing');
      expect(onlySpan(otlp.spans, 'keyroll rotate').attributes['keyroll.exit_code']).toBe(2);
    } finally {
      await otlp.close();
    }
  });

  it('answers --version and --help', () => {
    expect(run('--version').stdout.trim()).toBe('0.1.0');
    const help = run('--help');
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('rotate');
  });

  it('keeps the AWS SDK, the Vault client, fastify, age and prom-client out of what `rotate` loads before its first roll', () => {
    // The chunks holding the modules `rotate` imports on its way to the first roll, and every
    // chunk they import statically: what a cold start into the file backend compiles.
    const startPath = [
      'src/cli/entry.ts',
      'src/cli/main.ts',
      'src/cli/rotate.ts',
      'src/cli/execute-run.ts',
      'src/cli/select-keys.ts',
      'src/rotation/runtime.ts',
      'src/rotation/run.ts',
      'src/backends/file/backend.ts',
    ];
    const chunks = Object.entries(metafile.outputs)
      .filter(([, output]) => startPath.some((input) => input in output.inputs))
      .map(([name]) => name);
    expect(chunks.length).toBeGreaterThan(0);
    const loaded = new Set(chunks.flatMap((chunk) => [...loadedAtStart(metafile, chunk)]));
    for (const input of startPath) expect(loaded.has(input), input).toBe(true);
    for (const heavy of [
      'node_modules/@aws-sdk/',
      'node_modules/fastify/',
      'node_modules/age-encryption/',
      'node_modules/prom-client/',
      'node_modules/@opentelemetry/',
      'src/tracing/otel/',
      'src/backends/vault/backend.ts',
      'src/backends/aws/backend.ts',
      'src/emulator/server.ts',
    ]) {
      expect(
        [...loaded].filter((input) => input.includes(heavy)),
        heavy,
      ).toEqual([]);
    }
  });
});

describe('a bundle built without the OpenTelemetry packages (npm ci --omit=optional, or --without-tracing)', () => {
  let install: string;
  let metafile: Metafile;
  let remove: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    ({
      dir: install,
      metafile,
      remove,
    } = await installBundle('keyroll-bundle-untraced-', { tracing: false }));
  }, 60_000);

  afterAll(async () => {
    await remove?.();
  });

  it('holds none of OpenTelemetry, and asked for traces it says so and runs untraced', () => {
    // (@opentelemetry/api is prom-client's own dependency, not tracing's.)
    const inputs = Object.values(metafile.outputs).flatMap((output) => Object.keys(output.inputs));
    expect(
      inputs.filter(
        (input) =>
          (input.includes('@opentelemetry/') && !input.includes('@opentelemetry/api/')) ||
          input.includes('src/tracing/otel/'),
      ),
    ).toEqual([]);
    const rotate = spawnSync(
      process.execPath,
      [join(install, 'dist', 'cli', 'entry.js'), 'rotate', '-p', 'missing.yaml', '--all'],
      {
        cwd: install,
        encoding: 'utf8',
        timeout: 60_000,
        env: {
          PATH: process.env.PATH ?? '/usr/bin:/bin',
          HOME: install,
          OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
        },
      },
    );
    expect(rotate.status).toBe(2);
    expect(rotate.stderr).toMatch(
      /^keyroll: tracing: the OpenTelemetry SDK cannot be loaded \(this build leaves tracing out \(built without the optional OpenTelemetry packages\)\); running without traces$/m,
    );
  });
});
