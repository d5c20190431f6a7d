// Process entry: `node src/cli/entry.ts …` (or dist/cli/entry.js in the image).
import { main } from './main.ts';

// A closed stdout (`keyroll rotate … | head -1`) must not crash the process between a roll and
// its store: a broken pipe is handled like SIGTERM (in-flight stores finish, no new rotations).
let pipeClosed = false;
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') throw error;
  if (pipeClosed) return;
  pipeClosed = true;
  process.emit('SIGTERM', 'SIGTERM');
});

await main(process.argv);
