// Process entry: `node src/cli/entry.ts …` (or dist/cli/entry.js in the image).
import { main } from './main.ts';

await main(process.argv);
