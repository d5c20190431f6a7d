// Runs the keyroll CLI as an operator's CronJob or Job would: a child process of its own, the
// bundled dist/ with the Node flags of the Docker image's ENTRYPOINT and the environment of its
// ENV (read from the Dockerfile by test/support/image-runtime.ts, so the figures are of what the image runs), or the TypeScript
// sources, timed from spawn to exit.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { imageEnv, imageNodeFlags } from '../../test/support/image-runtime.ts';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const ENTRIES = {
  dist: join(ROOT, 'dist/cli/entry.js'),
  src: join(ROOT, 'src/cli/entry.ts'),
} as const;
export type Entry = keyof typeof ENTRIES;
const RSS_PRELOAD = fileURLToPath(new URL('./report-rss.js', import.meta.url));

/**
 * Where the benchmarks keep the compile cache for dist/: the counterpart of the image's
 * NODE_COMPILE_CACHE (the Dockerfile ENV), filled the way the image's build fills its own
 * (warmCompileCache). Inside dist/, so every build starts it afresh.
 */
export const BENCH_COMPILE_CACHE = join(ROOT, 'dist', 'compile-cache');

/** Fills BENCH_COMPILE_CACHE as the Docker build does: scripts/warm-compile-cache.js with the ENTRYPOINT's flags. */
export function warmCompileCache(): void {
  const warm = spawnSync(
    process.execPath,
    [...imageNodeFlags(), join(ROOT, 'scripts', 'warm-compile-cache.js'), join(ROOT, 'dist', 'cli')],
    {
      env: childEnv({ NODE_COMPILE_CACHE: BENCH_COMPILE_CACHE }),
      stdio: ['ignore', 'ignore', 'inherit'],
    },
  );
  if (warm.status !== 0)
    throw new Error(
      `scripts/warm-compile-cache.js exited ${String(warm.status)}${warm.error ? `: ${warm.error.message}` : ''}`,
    );
}

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** performance.now() of this process just before spawn. */
  spawnedAt: number;
  /** Spawn → exit, ms. */
  wallMs: number;
  /** Peak RSS of the keyroll process, MB (only when asked for). */
  maxRssMb?: number;
}

export interface CliOptions {
  cwd: string;
  env: Record<string, string>;
  entry?: Entry;
  /** Preload bench/lib/report-rss.js and report the peak RSS. */
  measureRss?: boolean;
  /** Kills the child after this long (every run is bounded). */
  timeoutMs: number;
  /** Node options before the entry; default: the image's for dist/ (imageNodeFlags), none for src/. */
  nodeFlags?: readonly string[];
}

/** The child's environment: PATH and HOME, plus what the benchmark passes; nothing else of the bench's own. */
export function childEnv(extra: Record<string, string>): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: process.env.HOME ?? '/root', ...extra };
}

export async function runCli(args: readonly string[], options: CliOptions): Promise<CliRun> {
  const entry = ENTRIES[options.entry ?? 'dist'];
  if (!existsSync(entry))
    throw new Error(
      `${entry} is missing: run the benchmarks through bench/run.sh (npm run bench), which builds dist/`,
    );
  const rssFile = join(
    options.cwd,
    `rss-${String(process.pid)}-${String(Math.round(performance.now()))}.json`,
  );
  // KEYROLL_BENCH_CPU_PROF=<dir> profiles every keyroll process a benchmark starts (docs/benchmarks.md).
  const profileDir = process.env.KEYROLL_BENCH_CPU_PROF;
  const dist = (options.entry ?? 'dist') === 'dist';
  const nodeArgs = [
    ...(options.nodeFlags ?? (dist ? imageNodeFlags() : [])),
    ...(options.measureRss ? ['--import', RSS_PRELOAD] : []),
    ...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []),
  ];
  // The image's ENV, with its compile cache at this machine's counterpart.
  const image = dist ? { ...imageEnv(), NODE_COMPILE_CACHE: BENCH_COMPILE_CACHE } : {};
  const env = childEnv({
    ...image,
    ...options.env,
    ...(options.measureRss ? { KEYROLL_BENCH_RSS_FILE: rssFile } : {}),
  });
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, [...nodeArgs, entry, ...args], {
    cwd: options.cwd,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  // 'exit' can come before the last pipe bytes are read; the streams' 'close' comes after.
  const drained = Promise.all([
    new Promise((r) => child.stdout.once('close', r)),
    new Promise((r) => child.stderr.once('close', r)),
  ]);
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
  const { code, exitedAt } = await new Promise<{ code: number | null; exitedAt: number }>(
    (resolve, reject) => {
      child.once('error', reject);
      child.once('exit', (exitCode) => {
        resolve({ code: exitCode, exitedAt: performance.now() });
      });
    },
  );
  clearTimeout(timer);
  await drained;
  const run: CliRun = { code, stdout, stderr, spawnedAt, wallMs: exitedAt - spawnedAt };
  if (options.measureRss) {
    const report = JSON.parse(await readFile(rssFile, 'utf8')) as { maxRssKb: number };
    run.maxRssMb = report.maxRssKb / 1024;
  }
  return run;
}

/** The last stdout line that parses as a JSON object with `keys` (the -o json report of run/rotate). */
export function jsonReport(stdout: string): {
  rotated: number;
  failed: number;
  skipped: number;
  exitCode: number;
  keys: { keyId: string; result: string; errorCode?: string }[];
} {
  const lines = stdout.split('\n').filter((line) => line.startsWith('{"runId"'));
  const last = lines.at(-1);
  if (last === undefined) throw new Error(`no -o json report on stdout; tail:\n${stdout.slice(-2000)}`);
  return JSON.parse(last) as ReturnType<typeof jsonReport>;
}
