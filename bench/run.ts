// `npm run bench`: runs every benchmark on this machine one after the other, prints one table
// (figure, value, goal, met?) and writes bench/results/latest.json with the machine it ran on.
// Benchmarks print figures; they assert nothing (tests assert behaviour).
//
//   node bench/run.ts                      every benchmark
//   node bench/run.ts exposure cold-start  only these
//   node bench/run.ts --quick              fewer samples (a smoke run; its figures are not the record)
// Run it through bench/run.sh (npm run bench), which installs what it needs first.
import { mkdir, writeFile } from 'node:fs/promises';
import { cpus, loadavg, totalmem, platform, release } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { warmCompileCache } from './lib/cli.ts';
import { describeGoal, meets, type BenchResult, type Figure } from './lib/figures.ts';

const BENCH_DIR = dirname(fileURLToPath(import.meta.url));

interface Benchmark {
  name: string;
  run: (options: { quick: boolean }) => Promise<BenchResult>;
}

// Imported lazily so `node bench/run.ts cold-start` loads only what it runs.
const BENCHMARKS: Benchmark[] = [
  { name: 'exposure', run: async (o) => (await import('./exposure.ts')).runExposureBench(o) },
  { name: 'emergency', run: async (o) => (await import('./emergency.ts')).runEmergencyBench(o) },
  { name: 'shell-loop', run: async (o) => (await import('./shell-loop.ts')).runShellLoopBench(o) },
  { name: 'requests', run: async () => (await import('./requests.ts')).runRequestsBench() },
  { name: 'aws-quota', run: async (o) => (await import('./aws-quota.ts')).runAwsQuotaBench(o) },
  { name: 'cold-start', run: async (o) => (await import('./cold-start.ts')).runColdStartBench(o) },
  { name: 'memory', run: async (o) => (await import('./memory.ts')).runMemoryBench(o) },
  { name: 'daemon-day', run: async (o) => (await import('./daemon-day.ts')).runDaemonDayBench(o) },
  { name: 'consumers', run: async (o) => (await import('./consumers.ts')).runConsumersBench(o) },
  { name: 'leak', run: async (o) => (await import('./leak.ts')).runLeakBench(o) },
  { name: 'leak-real', run: async (o) => (await import('./leak-real.ts')).runLeakRealBench(o) },
  { name: 'ha', run: async (o) => (await import('./ha.ts')).runHaBench(o) },
  { name: 'crd', run: async (o) => (await import('./crd.ts')).runCrdBench(o) },
  { name: 'replay-record', run: async (o) => (await import('./replay-record.ts')).runReplayRecordBench(o) },
];

export interface Machine {
  cpus: number;
  cpuModel: string;
  memoryGb: number;
  node: string;
  os: string;
}

export function machine(): Machine {
  const cpuList = cpus();
  return {
    cpus: cpuList.length,
    cpuModel: cpuList[0]?.model.trim() ?? 'unknown',
    memoryGb: Math.round((totalmem() / 1024 ** 3) * 10) / 10,
    node: process.version,
    os: `${platform()} ${release()}`,
  };
}

function formatValue(figure: Figure): string {
  if (Number.isNaN(figure.value)) return 'n/a';
  return `${String(figure.value)}${figure.unit === '×' ? '×' : figure.unit === '' ? '' : ` ${figure.unit}`}`;
}

/** A plain-text table; docs/benchmarks.md shows the same rows as Markdown. */
export function formatTable(figures: readonly Figure[]): string {
  const rows = [
    ['figure', 'value', 'goal', 'met?'],
    ...figures.map((f) => [
      f.name,
      formatValue(f),
      f.goal ? describeGoal(f.goal) : '',
      f.goal ? (meets(f.value, f.goal) ? 'yes' : 'NO') : '',
    ]),
  ];
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0))) ?? [];
  return rows
    .map((row) =>
      row
        .map((cell, column) => cell.padEnd(widths[column] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export function formatMarkdownTable(figures: readonly Figure[]): string {
  const lines = ['| figure | value | goal | met? |', '|---|---|---|---|'];
  for (const f of figures) {
    lines.push(
      `| \`${f.name}\` | ${formatValue(f)} | ${f.goal ? describeGoal(f.goal) : ''} | ${f.goal ? (meets(f.value, f.goal) ? 'yes' : '**no**') : ''} |`,
    );
  }
  return lines.join('\n');
}

async function main(argv: readonly string[]): Promise<number> {
  const quick = argv.includes('--quick');
  const names = argv.filter((arg) => !arg.startsWith('--'));
  const unknown = names.filter((name) => !BENCHMARKS.some((b) => b.name === name));
  if (unknown.length > 0) {
    console.error(
      `unknown benchmark(s): ${unknown.join(', ')}; known: ${BENCHMARKS.map((b) => b.name).join(', ')}`,
    );
    return 2;
  }
  const selected = names.length === 0 ? BENCHMARKS : BENCHMARKS.filter((b) => names.includes(b.name));
  const startedAt = new Date();
  // Other work on the machine moves every figure; the load averages say how much there was.
  const loadBefore = loadavg().map((l) => Math.round(l * 100) / 100);
  const figures: Figure[] = [];
  const notes: string[] = [];
  const results: Record<string, unknown> = {};
  const failures: string[] = [];
  // The image ships a compile cache made at build time (Dockerfile); the runs here get the same.
  warmCompileCache();
  for (const bench of selected) {
    const began = performance.now();
    console.error(`bench: ${bench.name}…`);
    try {
      const result = await bench.run({ quick });
      figures.push(...result.figures);
      notes.push(...(result.notes ?? []));
      results[bench.name] = {
        ...result.details,
        seconds: Math.round((performance.now() - began) / 100) / 10,
      };
      console.error(
        `bench: ${bench.name} done in ${String(Math.round((performance.now() - began) / 1000))} s`,
      );
    } catch (error) {
      // One broken benchmark must not hide the others' figures; the run still exits 1.
      const message = error instanceof Error ? (error.stack ?? error.message) : String(error);
      failures.push(bench.name);
      results[bench.name] = { error: message };
      console.error(`bench: ${bench.name} FAILED: ${message}`);
    }
  }

  const flat: Record<string, number> = {};
  for (const f of figures) flat[f.name] = f.value;
  const goals: Record<string, { goal: string; met: boolean }> = {};
  for (const f of figures)
    if (f.goal) goals[f.name] = { goal: describeGoal(f.goal), met: meets(f.value, f.goal) };
  const report = {
    date: startedAt.toISOString(),
    machine: {
      ...machine(),
      loadAverageBefore: loadBefore,
      loadAverageAfter: loadavg().map((l) => Math.round(l * 100) / 100),
    },
    quick,
    benchmarks: selected.map((b) => b.name),
    figures: flat,
    goals,
    results,
    notes,
  };
  const out = join(BENCH_DIR, 'results', 'latest.json');
  await mkdir(dirname(out), { recursive: true });
  await writeFile(out, `${JSON.stringify(report, null, 2)}\n`);
  // The same table in Markdown, ready for docs/benchmarks.md.
  const m = report.machine;
  const heading = `${startedAt.toISOString().slice(0, 10)} — ${String(m.cpus)} × ${m.cpuModel}, ${String(m.memoryGb)} GB, Node ${m.node}, load ${loadBefore.join(' ')}${quick ? ' — QUICK RUN' : ''}`;
  await writeFile(join(BENCH_DIR, 'results', 'latest.md'), `${heading}\n\n${formatMarkdownTable(figures)}\n`);

  console.log(`\nkeyroll benchmarks — ${heading}\n`);
  console.log(formatTable(figures));
  if (notes.length > 0) console.log(`\n${notes.map((n) => `- ${n}`).join('\n')}`);
  if (failures.length > 0) console.log(`\nFAILED: ${failures.join(', ')}`);
  console.log(`\nwritten: ${out} (and latest.md)`);
  return failures.length > 0 ? 1 : 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}
