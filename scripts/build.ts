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
// Type checking is not done here (esbuild strips types): `npm run typecheck` does it, in CI.
import { readFile, rm, writeFile } from 'node:fs/promises';
import { isBuiltin } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, transform, type BuildOptions, type Metafile, type Plugin } from 'esbuild';

const ROOT = fileURLToPath(new URL('../', import.meta.url));

/** The node:http2 constants undici's client-h2.js reads when it loads (values fixed by RFC 9113 and nghttp2). */
export const HTTP2_CONSTANTS_USED_BY_UNDICI = {
  HTTP2_HEADER_AUTHORITY: ':authority',
  HTTP2_HEADER_METHOD: ':method',
  HTTP2_HEADER_PATH: ':path',
  HTTP2_HEADER_SCHEME: ':scheme',
  HTTP2_HEADER_CONTENT_LENGTH: 'content-length',
  HTTP2_HEADER_EXPECT: 'expect',
  HTTP2_HEADER_STATUS: ':status',
  HTTP2_HEADER_PROTOCOL: ':protocol',
  NGHTTP2_NO_ERROR: 0,
  NGHTTP2_REFUSED_STREAM: 7,
} as const;

/**
 * Built-in modules that a dependency loads on start for a feature keyroll's start does not use,
 * each replaced, for that dependency only, by a stand-in that loads the real module on first use.
 * undici's client loads its HTTP/2 client, which loads node:http2 (and with it tls) to read
 * header-name constants; HTTP/2 is used only when a TLS server picks it (ALPN), and then the
 * stand-in loads the real module. commander loads node:child_process for executable
 * subcommands, which keyroll has none of. Together about 15 ms of every cold start.
 * test/packaging/lazy-builtins.test.ts checks each stand-in against the real module and against
 * what the dependency uses of it, so an upgrade that needs more fails the tests, not a run.
 */
export const LAZY_BUILTINS: readonly { importer: RegExp; module: string; contents: string }[] = [
  {
    importer: /node_modules\/undici\/lib\/dispatcher\/client-h2\.js$/,
    module: 'node:http2',
    contents: [
      "'use strict';",
      '// keyroll stand-in for node:http2 inside undici (scripts/build.ts, LAZY_BUILTINS).',
      'module.exports = {',
      `  constants: ${JSON.stringify(HTTP2_CONSTANTS_USED_BY_UNDICI)},`,
      "  connect: (...args) => require('node:http2').connect(...args),",
      '};',
    ].join('\n'),
  },
  {
    importer: /node_modules\/commander\/lib\/command\.js$/,
    module: 'node:child_process',
    contents: [
      '// keyroll stand-in for node:child_process inside commander (scripts/build.ts, LAZY_BUILTINS).',
      "export default { spawn: (...args) => require('node:child_process').spawn(...args) };",
    ].join('\n'),
  },
];

function lazyBuiltins(): Plugin {
  return {
    name: 'keyroll-lazy-builtins',
    setup(build) {
      build.onResolve({ filter: /^node:/ }, (args) => {
        const stub = LAZY_BUILTINS.find((entry) => entry.module === args.path && entry.importer.test(args.importer));
        return stub === undefined ? undefined : { path: args.path, namespace: 'keyroll-lazy-builtin', pluginData: stub };
      });
      build.onLoad({ filter: /.*/, namespace: 'keyroll-lazy-builtin' }, (args) => {
        const stub = args.pluginData as (typeof LAZY_BUILTINS)[number];
        return { contents: stub.contents, loader: 'js', resolveDir: ROOT };
      });
    },
  };
}

export interface BundleFeatures {
  /** Bundle the API emulator (`keyroll emulator`, `keyroll demo`). Default true; the image says false. */
  emulator?: boolean;
}

/**
 * Leaves the emulator out: src/cli/build-features.ts says so to the CLI, and the emulator's server
 * module (the only way into src/emulator/ from outside it) becomes an empty stand-in, so none of
 * its code, nor fastify, is in the bundle.
 */
function withoutEmulator(): Plugin {
  return {
    name: 'keyroll-without-emulator',
    setup(build) {
      build.onLoad({ filter: /src\/cli\/build-features\.ts$/ }, async (args) => ({
        contents: (await readFile(args.path, 'utf8')).replace('export const EMULATOR_IN_BUILD: boolean = true;', 'export const EMULATOR_IN_BUILD: boolean = false;'),
        loader: 'ts',
      }));
      build.onResolve({ filter: /\/emulator\/server\.ts$/ }, (args) =>
        /\/src\/emulator\//.test(args.importer) ? undefined : { path: 'emulator-left-out', namespace: 'keyroll-without-emulator' },
      );
      build.onLoad({ filter: /.*/, namespace: 'keyroll-without-emulator' }, () => ({
        contents: "export async function startEmulator() { throw new Error('the API emulator is not in this build'); }",
        loader: 'js',
      }));
    },
  };
}

/** The esbuild options (buildBundle builds with them; the packaging tests read them). */
export function bundleOptions(outdir: string, features: BundleFeatures = {}): BuildOptions & { metafile: true } {
  return {
    absWorkingDir: ROOT,
    entryPoints: ['src/cli/entry.ts'],
    outdir,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node22.19',
    // ASCII output (esbuild's default, stated because asciiComments below relies on it): V8 keeps
    // each module's source in memory for the life of the process, as Latin-1 when every character
    // fits and as UTF-16, twice the bytes, otherwise. One em dash in a comment of zod's made its
    // 0.74 MB chunk a 1.48 MB string.
    charset: 'ascii',
    chunkNames: 'chunks/[name]-[hash]',
    sourcemap: true,
    // Each dependency's licence comment goes to a <chunk>.LEGAL.txt beside the chunk it ships in.
    legalComments: 'linked',
    metafile: true,
    logLevel: 'warning',
    plugins: [lazyBuiltins(), ...(features.emulator === false ? [withoutEmulator()] : [])],
    // CommonJS dependencies (pino, undici, commander, yaml, the AWS SDK) call require() for
    // Node's built-in modules; an ES module has no require, so each chunk gets one.
    banner: { js: "import { createRequire as __keyrollCreateRequire } from 'node:module'; const require = __keyrollCreateRequire(import.meta.url);" },
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
 * Replaces each character beyond ASCII left in the bundle's JavaScript with '?'. With charset
 * 'ascii' esbuild escapes them in strings, templates and names, but writes comments, regular
 * expression literals, the raw text of tagged templates and JSX text as they are. Only comments
 * may change, so every changed file is checked: the code with comments dropped (esbuild,
 * minifyWhitespace) must be the same before and after, or the build fails. One '?' per UTF-16 unit
 * keeps every column, so the source maps stay right. Returns the files it changed.
 */
export async function asciiComments(metafile: Metafile, root = ROOT): Promise<string[]> {
  const changed: string[] = [];
  const codeOnly = async (text: string): Promise<string> => (await transform(text, { minifyWhitespace: true, format: 'esm', charset: 'utf8', legalComments: 'none', logLevel: 'silent' })).code;
  for (const output of Object.keys(metafile.outputs).filter((name) => name.endsWith('.js'))) {
    const file = `${root}${output}`;
    const text = await readFile(file, 'utf8');
    const ascii = text.replace(/[\u0080-\uffff]/g, '?');
    if (ascii === text) continue;
    if ((await codeOnly(text)) !== (await codeOnly(ascii))) {
      throw new Error(`${output}: a character beyond ASCII sits outside a comment (a regex literal, a tagged template, JSX); it cannot be blanked`);
    }
    await writeFile(file, ascii);
    changed.push(output);
  }
  return changed;
}

/**
 * The whole build into `distDir` (`<distDir>/cli/…`): the bundle, its comments made ASCII, the
 * check that it imports nothing but Node's built-ins, and the package.json that makes its chunks
 * ES modules. `npm run build` and the packaging tests build with this, so they test what ships.
 */
export async function buildBundle(distDir: string, logLevel: BuildOptions['logLevel'] = 'warning', features: BundleFeatures = {}): Promise<Metafile> {
  await rm(distDir, { recursive: true, force: true });
  const result = await build({ ...bundleOptions(join(distDir, 'cli'), features), logLevel });
  await asciiComments(result.metafile);
  const stray = externalImports(result.metafile).filter((path) => !isBuiltin(path));
  if (stray.length > 0) throw new Error(`the bundle would load ${stray.join(', ')} from node_modules at run time; bundle them or import them as node: built-ins`);
  // The chunks are ES modules wherever dist/ is copied to, without Node guessing from the syntax.
  await writeFile(join(distDir, 'package.json'), `${JSON.stringify({ type: 'module', private: true }, null, 2)}\n`);
  return result.metafile;
}

async function main(): Promise<void> {
  const metafile = await buildBundle(`${ROOT}dist`, 'warning', { emulator: !process.argv.includes('--without-emulator') });
  // What went into each chunk, for anyone asking what the image ships (esbuild's analyzer reads it).
  await writeFile(`${ROOT}dist/meta.json`, JSON.stringify(metafile));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
