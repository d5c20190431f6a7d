// Fills Node's compile cache for the bundle: `NODE_COMPILE_CACHE=<dir> node <flags> scripts/warm-compile-cache.js <dist/cli>`.
//
// Why: a CronJob pod starts with an empty /tmp, so a cache kept there (Node's default) never
// helps the image, and compiling the bundle's chunks cost every cold start about 60 ms
// (docs/benchmarks.md). The Docker build runs this once and the image ships the cache read-only
// (ENV NODE_COMPILE_CACHE); `npm run bench` does the same for the dist/ it measures.
// Node keys the cache by Node version, V8 flags, user id and file path, so the run that fills it
// must use the ENTRYPOINT's flags, the runtime's user and the files at the paths the image runs.
//
// It imports every chunk. A chunk only defines things (functions, classes, schemas); running a
// command is entry.js's job, which is why entry.js itself (a few lines) is left out.
// Plain JavaScript: it runs where there is no TypeScript tooling (the image's build stage).
import { readdirSync } from 'node:fs';
import { flushCompileCache, getCompileCacheDir } from 'node:module';
import { join, resolve } from 'node:path';
import process from 'node:process';
import { pathToFileURL } from 'node:url';

const dist = resolve(process.argv[2] ?? 'dist/cli');
if (getCompileCacheDir() === undefined) {
  process.stderr.write('warm-compile-cache: NODE_COMPILE_CACHE is not set; nothing would be kept\n');
  process.exit(2);
}
const chunks = readdirSync(join(dist, 'chunks'))
  .filter((name) => name.endsWith('.js'))
  .sort();
for (const chunk of chunks) await import(pathToFileURL(join(dist, 'chunks', chunk)).href);
flushCompileCache();
process.stderr.write(
  `warm-compile-cache: ${String(chunks.length)} chunks of ${dist} compiled into ${getCompileCacheDir() ?? ''}\n`,
);
