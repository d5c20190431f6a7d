// Benchmark 5: peak resident memory of keyroll rotating 1,000 keys: the emergency run of
// bench/emergency.ts (rotate --all --reason leak, file backend, 6,000 rolls/min, concurrency 16),
// its own run, measured by the kernel's high-water mark (getrusage ru_maxrss) that a preload
// (bench/lib/report-rss.js) reads as the process exits.
// Beside it, to show where the memory goes: the same binary doing nothing (`--version`), the
// same rotation of one key, and the 1,000 keys again with V8's young generation capped at 1 MB
// per semi-space (NODE_OPTIONS=--max-semi-space-size=1), a setting an image could choose.
import { tmpdir } from 'node:os';
import { EMERGENCY_CONCURRENCY, EMERGENCY_KEYS, rotateAllAfterLeak } from './emergency.ts';
import { runCli } from './lib/cli.ts';
import type { BenchResult } from './lib/figures.ts';
import { round } from './lib/stats.ts';

const SMALL_YOUNG_GENERATION = '--max-semi-space-size=1';

export async function runMemoryBench(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const count = options.quick ? 300 : EMERGENCY_KEYS;
  const idle = await runCli(['--version'], { cwd: tmpdir(), env: {}, measureRss: true, timeoutMs: 60_000 });
  const oneKey = await rotateAllAfterLeak({ count: 1, measureRss: true });
  const all = await rotateAllAfterLeak({ count, measureRss: true });
  const smallYoung = await rotateAllAfterLeak({ count, measureRss: true, nodeOptions: SMALL_YOUNG_GENERATION });
  for (const [name, run, expected] of [['one key', oneKey, 1], ['all keys', all, count], ['small young generation', smallYoung, count]] as const) {
    if (run.rotated !== expected) throw new Error(`memory bench (${name}): rotated ${String(run.rotated)} of ${String(expected)} keys`);
  }
  const mb = (value: number | undefined): number => round(value ?? NaN, 1);
  const rssMb = mb(all.maxRssMb);
  return {
    figures: [
      { name: 'rssMb', value: rssMb, unit: 'MB', goal: { op: '<=', target: 90 } },
      { name: 'rss.idleMb', value: mb(idle.maxRssMb), unit: 'MB' },
      { name: 'rss.oneKeyMb', value: mb(oneKey.maxRssMb), unit: 'MB' },
      { name: 'rss.semiSpace1Mb', value: mb(smallYoung.maxRssMb), unit: 'MB' },
    ],
    details: {
      rssMb,
      idleMb: mb(idle.maxRssMb),
      oneKeyMb: mb(oneKey.maxRssMb),
      semiSpace1Mb: mb(smallYoung.maxRssMb),
      keys: count,
      concurrency: EMERGENCY_CONCURRENCY,
      backend: 'file',
      measured: 'ru_maxrss of `node dist/cli/entry.js rotate --all --reason leak`; idle = the same binary running --version; semiSpace1 = NODE_OPTIONS=--max-semi-space-size=1',
    },
    notes: [`memory: peak RSS (ru_maxrss) of rotate --all over ${String(count)} keys, file backend, concurrency ${String(EMERGENCY_CONCURRENCY)}; beside it --version, one key, and ${SMALL_YOUNG_GENERATION}`],
  };
}
