// Benchmark 5: peak resident memory of keyroll rotating 1,000 keys: the emergency run of
// bench/emergency.ts (rotate --all --reason leak, file backend, 6,000 rolls/min, concurrency 16),
// its own run, measured by the kernel's high-water mark (getrusage ru_maxrss) that a preload
// (bench/lib/report-rss.js) reads as the process exits.
// keyroll runs as the image runs it: the bundle with the ENTRYPOINT's Node flags (a 2 MB
// young-generation semi-space, old space capped at 256 MB) and its ENV (MALLOC_ARENA_MAX=2); the
// Dockerfile says why. Printed, not a goal (issue 14): it keeps the cost of the memory visible.
// Beside it, to show where the memory goes: the same binary doing nothing (`--version`), the
// same rotation of one key, and the 1,000 keys again without the Node flags (V8's own sizing).
import { tmpdir } from 'node:os';
import { EMERGENCY_CONCURRENCY, EMERGENCY_KEYS, rotateAllAfterLeak } from './emergency.ts';
import { imageNodeFlags } from '../test/support/image-runtime.ts';
import { runCli } from './lib/cli.ts';
import type { BenchResult } from './lib/figures.ts';
import { round } from './lib/stats.ts';

export async function runMemoryBench(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const count = options.quick ? 300 : EMERGENCY_KEYS;
  const idle = await runCli(['--version'], { cwd: tmpdir(), env: {}, measureRss: true, timeoutMs: 60_000 });
  const oneKey = await rotateAllAfterLeak({ count: 1, measureRss: true });
  const all = await rotateAllAfterLeak({ count, measureRss: true });
  const v8Defaults = await rotateAllAfterLeak({ count, measureRss: true, nodeFlags: [] });
  for (const [name, run, expected] of [
    ['one key', oneKey, 1],
    ['all keys', all, count],
    ['V8 defaults', v8Defaults, count],
  ] as const) {
    if (run.rotated !== expected)
      throw new Error(`memory bench (${name}): rotated ${String(run.rotated)} of ${String(expected)} keys`);
  }
  const mb = (value: number | undefined): number => round(value ?? NaN, 1);
  const rssMb = mb(all.maxRssMb);
  return {
    figures: [
      { name: 'rssMb', value: rssMb, unit: 'MB' },
      { name: 'rss.idleMb', value: mb(idle.maxRssMb), unit: 'MB' },
      { name: 'rss.oneKeyMb', value: mb(oneKey.maxRssMb), unit: 'MB' },
      { name: 'rss.v8DefaultsMb', value: mb(v8Defaults.maxRssMb), unit: 'MB' },
    ],
    details: {
      rssMb,
      idleMb: mb(idle.maxRssMb),
      oneKeyMb: mb(oneKey.maxRssMb),
      v8DefaultsMb: mb(v8Defaults.maxRssMb),
      nodeFlags: imageNodeFlags(),
      keys: count,
      concurrency: EMERGENCY_CONCURRENCY,
      backend: 'file',
      measured:
        'ru_maxrss of `node <ENTRYPOINT flags> dist/cli/entry.js rotate --all --reason leak`; idle = the same binary running --version; v8Defaults = the same 1,000 keys without the flags',
    },
    notes: [
      `memory: peak RSS (ru_maxrss) of rotate --all over ${String(count)} keys, file backend, concurrency ${String(EMERGENCY_CONCURRENCY)}; beside it --version, one key, and V8's default heap sizing`,
    ],
  };
}
