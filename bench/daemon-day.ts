// Benchmark 6: the daemon over a simulated day with 1,000 scheduled keys: heap growth between
// the end of the first hour and the end of the last hour, after full collections. A leak per
// tick, per sweep or per rotation shows here; what every key legitimately keeps (its metric
// series, its health record) is in place at both points, because every key rotates once in the
// hour before the day starts (the daemon's first sweep: they were never rotated).
//
// The keys run on 24 daily schedules ("0 H * * *", 42 or 41 keys each, UTC), so every hour has
// its burst of rotations; the sweep reads every key's state once an hour (checkIntervalMs, 1 h
// rather than the default 5 min, to keep 24 simulated hours within a minute or two of real time).
// The daemon runs in its own process (bench/daemon-day-run.ts, --expose-gc) on a fake clock;
// the emulator in another; secrets go to the file backend.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { DaemonDayReport, DaemonDaySettings } from './daemon-day-run.ts';
import { startEmulatorProcess } from './lib/emulator-process.ts';
import type { BenchResult } from './lib/figures.ts';
import { childEnv } from './lib/cli.ts';
import { round } from './lib/stats.ts';
import { OWNER_TOKEN, policyYaml } from './lib/world.ts';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';

const KEYS = 1_000;
const CHECK_INTERVAL_MS = 3_600_000;
const CONCURRENCY = 4;
const TIME_LIMIT_MS = 300_000;
const RUNNER = fileURLToPath(new URL('./daemon-day-run.ts', import.meta.url));

async function runDay(settings: DaemonDaySettings): Promise<DaemonDayReport> {
  const child = spawn(process.execPath, ['--expose-gc', RUNNER, JSON.stringify(settings)], {
    env: childEnv({}),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const timer = setTimeout(() => child.kill('SIGKILL'), settings.timeLimitMs + 60_000);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (exitCode, exitSignal) => {
      resolve([exitCode, exitSignal]);
    });
  });
  clearTimeout(timer);
  const line = stdout.trim().split('\n').at(-1);
  if (code !== 0 || line === undefined || line === '')
    throw new Error(`daemon-day-run exited ${String(code ?? signal)}:\n${stderr.slice(-3000)}`);
  return JSON.parse(line) as DaemonDayReport;
}

export async function runDaemonDayBench(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const count = options.quick ? 240 : KEYS;
  const dir = await mkdtemp(join(tmpdir(), 'keyroll-bench-daemon-'));
  const ids = Array.from({ length: count }, (_, i) => `key_day_${String(i).padStart(4, '0')}`);
  const emulator = await startEmulatorProcess({ dir, keyIds: ids, rollRateLimitPerMinute: 1_000_000 });
  try {
    const policyFile = join(dir, 'policy.yaml');
    const keys = ids.map((id, i) => ({
      id,
      backend: 'files',
      path: `${id}.json`,
      schedule: `0 ${String(i % 24)} * * *`,
    }));
    await writeFile(
      policyFile,
      policyYaml({
        baseUrl: emulator.url,
        // keyroll's limiter must never pause: a pause waits on the fake clock (bench/daemon-day-run.ts).
        rateLimitPerMinute: 1_000_000,
        backends: `  files: { kind: file, directory: ${join(dir, 'secrets')} }`,
        keys,
        defaults: '  timezone: UTC\n  minInterval: 30m',
      }),
    );
    const report = await runDay({
      policyFile,
      ownerToken: OWNER_TOKEN,
      startAt: '2030-01-06T23:00:00.000Z',
      checkIntervalMs: CHECK_INTERVAL_MS,
      concurrency: CONCURRENCY,
      timeLimitMs: TIME_LIMIT_MS,
    });
    const growthPct = round(
      ((report.lastHour.heapUsedMb - report.firstHour.heapUsedMb) / report.firstHour.heapUsedMb) * 100,
      2,
    );
    return {
      figures: [
        { name: 'daemonHeapGrowthPct', value: growthPct, unit: '%', goal: { op: '<', target: 5 } },
        { name: 'daemon.heapFirstHourMb', value: report.firstHour.heapUsedMb, unit: 'MB' },
        { name: 'daemon.heapLastHourMb', value: report.lastHour.heapUsedMb, unit: 'MB' },
        { name: 'daemon.rotationsPerDay', value: report.rotations.day, unit: '' },
      ],
      details: {
        daemonHeapGrowthPct: growthPct,
        keys: count,
        schedules: '24 daily patterns "0 H * * *" (UTC), keys spread evenly',
        checkIntervalMs: CHECK_INTERVAL_MS,
        concurrency: CONCURRENCY,
        backend: 'file',
        ...report,
      },
      notes: [
        `daemon day: ${String(count)} keys on 24 daily schedules, sweep hourly, fake clock; heap used after full GCs at the end of hour 1 vs hour 24; ${String(report.rotations.day)} rotations in the day, ${String(report.failed)} failed`,
      ],
    };
  } finally {
    await emulator.stop();
    await rm(dir, { recursive: true, force: true });
  }
}
