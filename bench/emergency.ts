// Benchmark 2: emergency rotation of 1,000 keys (`keyroll rotate --all --reason leak`) against
// the emulator set to 6,000 rolls per minute, with 429 + Retry-After beyond that. The emulator
// enforces the rate as a token bucket holding one second of it (100 rolls, refilled at 100 per
// second; `rollRateBurstSeconds`), not as clock-minute windows: 1,000 rolls never exceed 6,000 in
// a minute, so with windows nothing would ever be refused and a client firing all 1,000 at once
// would "beat" the floor. With the bucket, outrunning the rate by more than one burst meets 429.
// The floor is what the rate limit allows at best: 1,000 rolls at 6,000/min = 10 s (strictly,
// 9.9 s after the first 100 of the full bucket, which the floor ignores). keyroll's own limiter is
// set to the same rate (api.rateLimitPerMinute: 6000), so it paces itself instead of running
// into 429s; the share of 429s it still met is reported as measured.
//
// keyroll runs as the compiled CLI in a child process, as a leak-response Job would; the
// emulator runs in this process. Secrets go to the file backend: the figure is about pacing
// against the API, and a local disk keeps the backend out of the way on a 2-core machine.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { jsonReport, runCli } from './lib/cli.ts';
import type { BenchResult } from './lib/figures.ts';
import { round } from './lib/stats.ts';
import { OWNER_TOKEN, startWorld, type World } from './lib/world.ts';

export const EMERGENCY_KEYS = 1_000;
export const EMERGENCY_RATE_PER_MINUTE = 6_000;
export const EMERGENCY_CONCURRENCY = 16;
/** Seconds of the rate the emulator's roll bucket holds. */
export const EMERGENCY_BURST_SECONDS = 1;
const TIME_LIMIT_MS = 180_000;

export interface LeakRotation {
  wallMs: number;
  rotated: number;
  failed: number;
  rollRequests: number;
  rolls429: number;
  /** Keys whose live secret is not the one stored: rolled and lost. */
  lost: number;
  maxRssMb?: number;
  exitCode: number | null;
}

/** Counts keys whose working secret is not what the file backend holds for them. */
async function countLost(world: World, keyIds: readonly string[], secretsDir: string): Promise<number> {
  let lost = 0;
  for (const id of keyIds) {
    let stored: string | undefined;
    try {
      stored = (JSON.parse(await readFile(join(secretsDir, `${id}.json`), 'utf8')) as { apiKey?: string })
        .apiKey;
    } catch {
      stored = undefined;
    }
    // A key never rolled still works with its seed secret; only a rolled key can be lost.
    if (
      world.emulator.state.rollCount(id) > 0 &&
      (stored === undefined || !world.emulator.state.isLiveSecret(id, stored))
    )
      lost++;
  }
  return lost;
}

/** One leak rotation of `count` keys with the CLI; shared with the memory benchmark. */
export async function rotateAllAfterLeak(options: {
  count: number;
  measureRss?: boolean;
  nodeFlags?: readonly string[];
}): Promise<LeakRotation> {
  const world = await startWorld({
    rollRateLimitPerMinute: EMERGENCY_RATE_PER_MINUTE,
    rollRateBurstSeconds: EMERGENCY_BURST_SECONDS,
  });
  try {
    const keyIds = world.addKeys('key_leak_', options.count);
    const secretsDir = join(world.dir, 'secrets');
    const policy = await world.writePolicy('policy.yaml', {
      rateLimitPerMinute: EMERGENCY_RATE_PER_MINUTE,
      backends: `  files: { kind: file, directory: ${secretsDir} }`,
      keys: keyIds.map((id) => ({ id, backend: 'files', path: `${id}.json` })),
    });
    const run = await runCli(
      [
        'rotate',
        '--all',
        '--reason',
        'leak',
        '--actor',
        'bench',
        '--policy',
        policy,
        '--concurrency',
        String(EMERGENCY_CONCURRENCY),
        '-o',
        'json',
      ],
      {
        cwd: world.dir,
        env: { KEYROLL_API_TOKEN: OWNER_TOKEN },
        measureRss: options.measureRss === true,
        timeoutMs: TIME_LIMIT_MS,
        ...(options.nodeFlags ? { nodeFlags: options.nodeFlags } : {}),
      },
    );
    const report = jsonReport(run.stdout);
    const rollRequests = world.emulator.state.callCount('roll');
    return {
      wallMs: run.wallMs,
      rotated: report.rotated,
      failed: report.failed,
      rollRequests,
      rolls429: rollRequests - world.emulator.state.totalRolls(),
      lost: await countLost(world, keyIds, secretsDir),
      exitCode: run.code,
      ...(run.maxRssMb === undefined ? {} : { maxRssMb: run.maxRssMb }),
    };
  } finally {
    await world.close();
  }
}

export async function runEmergencyBench(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const count = options.quick ? 300 : EMERGENCY_KEYS;
  const floorMs = (count / EMERGENCY_RATE_PER_MINUTE) * 60_000;
  const result = await rotateAllAfterLeak({ count });
  const wallToFloor = round(result.wallMs / floorMs, 3);
  const share429 = result.rollRequests === 0 ? 0 : round(result.rolls429 / result.rollRequests, 4);
  return {
    figures: [
      { name: 'emergencyWallToFloor', value: wallToFloor, unit: '×', goal: { op: '<=', target: 1.05 } },
      { name: 'emergencyWallMs', value: Math.round(result.wallMs), unit: 'ms' },
      { name: 'share429', value: share429, unit: '' },
      { name: 'lost', value: result.lost, unit: 'keys', goal: { op: '==', target: 0 } },
    ],
    details: {
      emergencyWallToFloor: wallToFloor,
      share429,
      lost: result.lost,
      keys: count,
      floorMs,
      wallMs: round(result.wallMs, 1),
      rotated: result.rotated,
      failed: result.failed,
      rollRequests: result.rollRequests,
      rolls429: result.rolls429,
      exitCode: result.exitCode,
      emulatorRollsPerMinute: EMERGENCY_RATE_PER_MINUTE,
      emulatorLimiter: `token bucket: ${String((EMERGENCY_RATE_PER_MINUTE / 60) * EMERGENCY_BURST_SECONDS)} rolls, refilled at ${String(EMERGENCY_RATE_PER_MINUTE / 60)}/s; 429 + Retry-After (whole seconds, at least 1) without a token`,
      keyrollRateLimitPerMinute: EMERGENCY_RATE_PER_MINUTE,
      concurrency: EMERGENCY_CONCURRENCY,
      backend: 'file',
      wall: 'spawn of `node dist/cli/entry.js rotate --all --reason leak` to its exit',
    },
    notes: [
      `emergency: ${String(count)} keys, rotate --all --reason leak --concurrency ${String(EMERGENCY_CONCURRENCY)}, file backend, emulator and keyroll at ${String(EMERGENCY_RATE_PER_MINUTE)} rolls/min (emulator: token bucket of ${String(EMERGENCY_BURST_SECONDS)} s of the rate, so going faster meets 429 + Retry-After); wall = process spawn to exit; floor = ${String(floorMs / 1000)} s`,
    ],
  };
}
