// Preloaded into a measured keyroll process (`node --import`): when the process exits, writes its
// peak resident set size (getrusage ru_maxrss) to the file KEYROLL_BENCH_RSS_FILE names.
// It adds one listener and nothing else to the process it measures. Plain JavaScript on purpose:
// a .ts preload would load Node's type stripper, megabytes that keyroll's dist/ never loads.
import { writeFileSync } from 'node:fs';
import process from 'node:process';

const file = process.env.KEYROLL_BENCH_RSS_FILE;
if (file !== undefined && file !== '') {
  process.on('exit', () => {
    writeFileSync(file, JSON.stringify({ maxRssKb: process.resourceUsage().maxRSS }));
  });
}
