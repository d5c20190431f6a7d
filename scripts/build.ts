// `npm run build`: bundles the CLI (src/cli/entry.ts) and every dependency it can load into
// dist/cli/, the code the Docker image runs (`node /app/dist/cli/entry.js`).
//
// Why a bundle rather than tsc's one-file-per-module output plus node_modules: a cold start of
// `keyroll rotate` loaded 543 files (undici 110, zod 95, yaml 72, keyroll 80, …) before the
// first roll; the bundle loads about 40 chunks, so the first roll leaves sooner and the process
// is smaller (docs/benchmarks.md has the figures). Code splitting keeps what a command may
// never need (AWS SDK, Vault client, fastify for the emulator, age for the escrow, prom-client
// for the daemon) in chunks of their own, loaded by the same dynamic import() as from the sources.
// The image then needs no node_modules at all: test/packaging/bundle.test.ts checks that the
// bundle imports nothing but Node's built-in modules.
//
// `--without-emulator` (the Dockerfile's build) leaves the API emulator out: its fault routes are
// unauthenticated and production has no use for a fake API. `npm run build` keeps it, so the
// packaging tests can run `keyroll demo` from the bundle.
//
// Tracing (src/tracing/otel/, the OpenTelemetry SDK) is in its own chunk, loaded only when the
// OTEL_* variables switch tracing on. Its packages are optional dependencies: an install without
// them (`npm ci --omit=optional`) still builds, leaving tracing out (as `--without-tracing` does),
// and that bundle says so when asked for traces and runs untraced (docs/tracing.md).
//
// The output is esbuild's own: no plugin rewrites a dependency's code or stands in for a module it
// loads (issue 14: start-up time is not worth what a maintainer would have to reverse-engineer).
//
// `npm run build` also builds the AWS-native rotation function (scripts/build-rotation-function.ts):
// dist/keyroll-aws-rotation.zip; the image's build (--without-emulator) leaves it out.
//
// Type checking is not done here (esbuild strips types): `npm run typecheck` does it, in CI.
import { readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire, isBuiltin } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type BuildOptions, type Metafile, type Plugin } from 'esbuild';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

export interface BundleFeatures {
  /** Bundle the API emulator (`keyroll emulator`, `keyroll demo`). Default true; the image says false. */
  emulator?: boolean;
  /** Bundle the OpenTelemetry SDK. Default: when its (optional) packages are installed. */
  tracing?: boolean;
}

/** True when the optional OpenTelemetry packages are installed (`npm ci` without --omit=optional). */
export function tracingInstalled(): boolean {
  try {
    createRequire(`${ROOT}package.json`).resolve('@opentelemetry/sdk-trace');
    return true;
  } catch {
    return false;
  }
}

/**
 * Leaves tracing out: src/tracing/start.ts's dynamic import of the SDK module (the only way into
 * src/tracing/otel/) becomes a module that fails to load, which start.ts reports as tracing not
 * being available, so none of OpenTelemetry is in the bundle or needs to be installed to build it.
 */
function withoutTracing(): Plugin {
  return {
    name: 'keyroll-without-tracing',
    setup(build) {
      build.onResolve({ filter: /\/otel\/sdk\.ts$/ }, (args) =>
        /\/src\/tracing\/otel\//.test(args.importer)
          ? undefined
          : { path: 'tracing-left-out', namespace: 'keyroll-without-tracing' },
      );
      build.onLoad({ filter: /.*/, namespace: 'keyroll-without-tracing' }, () => ({
        contents:
          "throw new Error('this build leaves tracing out (built without the optional OpenTelemetry packages)');",
        loader: 'js',
      }));
    },
  };
}

/**
 * Leaves the emulator out: src/cli/build-features.ts says so to the CLI, and the emulator's server
 * module's entry file (public/server.ts, the only way into src/emulator/ from outside it; the
 * module itself before entry files) becomes an empty stand-in, so none of its code, nor fastify, is in the bundle.
 */
function withoutEmulator(): Plugin {
  return {
    name: 'keyroll-without-emulator',
    setup(build) {
      build.onLoad({ filter: /src\/cli\/build-features\.ts$/ }, async (args) => ({
        contents: (await readFile(args.path, 'utf8')).replace(
          'export const EMULATOR_IN_BUILD: boolean = true;',
          'export const EMULATOR_IN_BUILD: boolean = false;',
        ),
        loader: 'ts',
      }));
      build.onResolve({ filter: /\/emulator\/(public\/)?server\.ts$/ }, (args) =>
        /\/src\/emulator\//.test(args.importer)
          ? undefined
          : { path: 'emulator-left-out', namespace: 'keyroll-without-emulator' },
      );
      build.onLoad({ filter: /.*/, namespace: 'keyroll-without-emulator' }, () => ({
        contents:
          "export async function startEmulator() { throw new Error('the API emulator is not in this build'); }",
        loader: 'js',
      }));
    },
  };
}

/**
 * ws (pulled in by @kubernetes/client-node) tries `require('bufferutil')` and
 * `require('utf-8-validate')` inside try/catch and uses its own JavaScript when they are missing.
 * They are native add-ons keyroll does not install, so they resolve to a module that throws as it
 * loads: ws takes its fallback, and the bundle loads nothing from node_modules at run time.
 */
const WS_OPTIONAL_ADDONS = /^(bufferutil|utf-8-validate)$/;

function withoutWsAddons(): Plugin {
  return {
    name: 'keyroll-without-ws-addons',
    setup(build) {
      build.onResolve({ filter: WS_OPTIONAL_ADDONS }, (args) => ({
        path: args.path,
        namespace: 'keyroll-without-ws-addons',
      }));
      build.onLoad({ filter: /.*/, namespace: 'keyroll-without-ws-addons' }, (args) => ({
        contents: `throw new Error(${JSON.stringify(`${args.path} is not in this build (ws uses its JavaScript fallback)`)});`,
        loader: 'js',
      }));
    },
  };
}

/** The esbuild options (buildBundle builds with them; the packaging tests read them). */
export function bundleOptions(
  outdir: string,
  features: BundleFeatures = {},
): BuildOptions & { metafile: true } {
  return {
    absWorkingDir: ROOT,
    entryPoints: ['src/cli/entry.ts'],
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node24',
    chunkNames: 'chunks/[name]-[hash]',
    sourcemap: true,
    // Each dependency's licence comment goes to a <chunk>.LEGAL.txt beside the chunk it ships in.
    legalComments: 'linked',
    metafile: true,
    logLevel: 'warning',
    plugins: [
      withoutWsAddons(),
      ...(features.emulator === false ? [withoutEmulator()] : []),
      ...((features.tracing ?? tracingInstalled()) ? [] : [withoutTracing()]),
    ],
    // CommonJS dependencies (pino, undici, commander, yaml, the AWS SDK) call require() for
    // Node's built-in modules; an ES module has no require, so each chunk gets one.
    banner: {
      js: "import { createRequire as __keyrollCreateRequire } from 'node:module'; const require = __keyrollCreateRequire(import.meta.url);",
    },
  };
}

/** Imports the bundle leaves to Node at run time: anything but a built-in module is a packaging bug. */
export function externalImports(metafile: Metafile): string[] {
  const external = new Set<string>();
  for (const output of Object.values(metafile.outputs)) {
    for (const imported of output.imports) if (imported.external) external.add(imported.path);
  }
  return [...external].sort();
}

/**
 * The whole build into `distDir` (`<distDir>/cli/…`): the bundle, the check that it imports
 * nothing but Node's built-ins, and the package.json that makes its chunks ES modules. `npm run build` and the packaging tests build with this, so they test what ships.
 */
export async function buildBundle(
  distDir: string,
  logLevel: BuildOptions['logLevel'] = 'warning',
  features: BundleFeatures = {},
): Promise<Metafile> {
  await rm(distDir, { recursive: true, force: true });
  const result = await build({ ...bundleOptions(join(distDir, 'cli'), features), logLevel });
  const stray = externalImports(result.metafile).filter((path) => !isBuiltin(path));
  if (stray.length > 0)
    throw new Error(
      `the bundle would load ${stray.join(', ')} from node_modules at run time; bundle them or import them as node: built-ins`,
    );
  // The chunks are ES modules wherever dist/ is copied to, without Node guessing from the syntax.
  await writeFile(
    join(distDir, 'package.json'),
    `${JSON.stringify({ type: 'module', private: true }, null, 2)}\n`,
  );
  return result.metafile;
}

async function main(): Promise<void> {
  const imageBuild = process.argv.includes('--without-emulator');
  const metafile = await buildBundle(`${ROOT}dist`, 'warning', {
    emulator: !imageBuild,
    ...(process.argv.includes('--without-tracing') ? { tracing: false } : {}),
  });
  // What went into each chunk, for anyone asking what the image ships (esbuild's analyzer reads it).
  await writeFile(`${ROOT}dist/meta.json`, JSON.stringify(metafile));
  // The AWS-native rotation function (docs/aws-native.md): dist/keyroll-aws-rotation.zip. Not in the
  // image's build (the Dockerfile copies only this script): the image has no use for a Lambda zip.
  if (!imageBuild) await (await import('./build-rotation-function.ts')).buildRotationFunction(`${ROOT}dist`);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
