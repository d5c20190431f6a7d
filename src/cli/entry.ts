// Process entry: `node src/cli/entry.ts …` (or dist/cli/entry.js in the image).
import { enableCompileCache } from 'node:module';

// Cold start is mostly compiling the dependencies (commander, pino, zod, yaml, undici): Node's
// on-disk compile cache (in the OS temp dir, or NODE_COMPILE_CACHE) skips that after the first
// run. Enabled before anything else is imported, hence the dynamic import below.
enableCompileCache();

// A closed stdout (`keyroll rotate … | head -1`) must not crash the process between a roll and
// its store: a broken pipe is handled like SIGTERM (in-flight stores finish, no new rotations).
let pipeClosed = false;
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  if (pipeClosed) return;
  pipeClosed = true;
  process.emit('SIGTERM', 'SIGTERM');
});

const { main } = await import('./main.ts');
await main(process.argv);
