// Process entry: `node src/cli/entry.ts …` (or dist/cli/entry.js in the image).
import { enableCompileCache } from 'node:module';
import { keepProcessMemoryPrivate } from '../audit/public/harden.ts';

// Cold start is mostly compiling the dependencies (commander, pino, zod, yaml, undici): Node's
// on-disk compile cache skips that. The image ships one made at build time (NODE_COMPILE_CACHE,
// read-only; the Dockerfile says how); elsewhere it lives in the OS temp dir and helps from the
// second run on. Enabled before anything else is imported, hence the dynamic import below.
enableCompileCache();

// No inspector on SIGUSR1 and no environment in diagnostic reports: the heap holds secrets
// (src/audit/harden.ts says what else keeps it private).
keepProcessMemoryPrivate();

// A closed stdout (`keyroll rotate … | head -1`) must not crash the process between a roll and
// its store: a broken pipe is handled like SIGTERM (in-flight stores finish, no new rotations).
let pipeClosed = false;
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  if (pipeClosed) return;
  pipeClosed = true;
  process.emit('SIGTERM', 'SIGTERM');
});

// zod compiles a fast path for each object schema (new Function) the first time it parses with
// it: worth it for a server parsing millions of bodies, a loss for a CLI that parses a policy and
// a few answers per key (zod's CPU in a cold `rotate`: 64 → 40 ms without it). Set before the
// first parse (main's modules only build schemas); loaded in the same round as main.
const [{ z }, { main }] = await Promise.all([import('zod'), import('./main.ts')]);
z.config({ jitless: true });
await main(process.argv);
