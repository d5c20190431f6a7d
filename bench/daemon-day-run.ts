// The measured process of bench/daemon-day.ts: `keyroll daemon` (Daemon.start, in this process)
// over one simulated day on a fake clock, against the emulator in another process and a file
// backend. Started as `node --expose-gc bench/daemon-day-run.ts <settings JSON>`; prints one JSON
// line with the heap after full collections at the end of the first and of the last hour.
//
// Time moves only between timers: the loop fires the next due timer (croner's ticks, the sweep
// interval), then waits in real time until every rotation it started is done, so a request's
// own timeout never fires while its answer is on the way.
import { performance } from 'node:perf_hooks';
import { Writable } from 'node:stream';
import FakeTimers from '@sinonjs/fake-timers';
import { staticCredential } from '../src/api/credentials.ts';
import { createAuditLog } from '../src/audit/logger.ts';
import { Secret } from '../src/audit/secret.ts';
import { Daemon } from '../src/daemon/daemon.ts';

export interface DaemonDaySettings {
  policyFile: string;
  ownerToken: string;
  /** Fake-clock start, ISO-8601: one hour before the measured day, for the first rotation of every key. */
  startAt: string;
  checkIntervalMs: number;
  concurrency: number;
  /** Bounds the whole simulation in real time. */
  timeLimitMs: number;
}

export interface HeapSample {
  at: string;
  heapUsedMb: number;
  heapTotalMb: number;
  rssMb: number;
}

export interface DaemonDayReport {
  firstHour: HeapSample;
  lastHour: HeapSample;
  rotations: { firstHour: number; lastHour: number; day: number; warmUp: number };
  failed: number;
  timerSteps: number;
  realSeconds: number;
}

const HOUR_MS = 3_600_000;
/** Real time a settle may take before the run is declared stuck (something waits on the fake clock). */
const SETTLE_LIMIT_MS = 60_000;
// Captured before the fake clock is installed.
const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;

function collectAndMeasure(at: number): HeapSample {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('run with node --expose-gc');
  // Several full collections: weak references and finalizers settle over more than one.
  for (let i = 0; i < 4; i++) gc();
  const memory = process.memoryUsage();
  const mb = (bytes: number): number => Math.round((bytes / 1_048_576) * 100) / 100;
  return {
    at: new Date(at).toISOString(),
    heapUsedMb: mb(memory.heapUsed),
    heapTotalMb: mb(memory.heapTotal),
    rssMb: mb(memory.rss),
  };
}

function count<K>(counts: ReadonlyMap<K, number>, mark: K): number {
  return counts.get(mark) ?? 0;
}

async function simulateDay(settings: DaemonDaySettings): Promise<DaemonDayReport> {
  const began = performance.now();
  const startMs = Date.parse(settings.startAt);
  const dayStartMs = startMs + HOUR_MS;
  const firstHourEnd = dayStartMs + HOUR_MS;
  const dayEnd = dayStartMs + 24 * HOUR_MS;
  // Modules are loaded above, before the fake clock: whatever they captured at load stays real.
  const clock = FakeTimers.install({
    now: startMs,
    toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
  });
  let succeeded = 0;
  let failed = 0;
  const audit = createAuditLog({
    // Lines are counted, not kept: the daemon writes them to stdout, which keeps nothing either.
    destination: new Writable({
      write(chunk: Buffer, _encoding, done) {
        const line = chunk.toString('utf8');
        if (line.includes('"event":"key.succeeded"')) succeeded++;
        if (line.includes('"event":"key.failed"')) failed++;
        done();
      },
    }),
    now: () => Date.now(),
  });
  // Marks on the fake clock, set before any croner timer exists: a timer due at the same instant
  // as a schedule's tick fires first, so each mark sees the state before that hour's rotations.
  type Mark = 'dayStart' | 'firstHourEnd' | 'lastHourStart' | 'dayEnd';
  const marks: [Mark, number][] = [
    ['dayStart', dayStartMs],
    ['firstHourEnd', firstHourEnd],
    ['lastHourStart', dayEnd - HOUR_MS],
    ['dayEnd', dayEnd],
  ];
  let reached: Mark | undefined;
  for (const [name, at] of marks) {
    setTimeout(() => {
      reached = name;
    }, at - startMs);
  }
  const daemon = await Daemon.start({
    policyFile: settings.policyFile,
    listen: { host: '127.0.0.1', port: 0 },
    audit,
    checkIntervalMs: settings.checkIntervalMs,
    concurrency: settings.concurrency,
    env: {},
    // No backoff or Retry-After wait may sleep on the fake clock (see settle).
    runtime: {
      credentials: staticCredential(new Secret(settings.ownerToken), 'bench owner token'),
      sleep: () => Promise.resolve(),
    },
  });
  const settleOnce = async (): Promise<void> => {
    // A tick's rotations register as work once their first step starts; look twice.
    for (let i = 0; i < 2; i++) {
      await daemon.idle();
      await new Promise((resolve) => setImmediate(resolve));
    }
  };
  // Nothing in a rotation may wait on the fake clock (no rate-limit pause, no backoff), or this
  // would wait for ever: bounded in real time, it fails the run instead.
  const settle = async (): Promise<void> => {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        settleOnce(),
        new Promise<never>((_, reject) => {
          timer = realSetTimeout(() => {
            reject(
              new Error(
                `the daemon did not become idle within ${String(SETTLE_LIMIT_MS)} ms at ${new Date(clock.now).toISOString()}`,
              ),
            );
          }, SETTLE_LIMIT_MS);
        }),
      ]);
    } finally {
      realClearTimeout(timer);
    }
  };

  const succeededAt = new Map<Mark, number>();
  let firstHour: HeapSample | undefined;
  let lastHour: HeapSample | undefined;
  let timerSteps = 0;
  try {
    await settle();
    while (lastHour === undefined) {
      if (performance.now() - began > settings.timeLimitMs)
        throw new Error(
          `simulation exceeded ${String(settings.timeLimitMs)} ms of real time at ${new Date(clock.now).toISOString()}`,
        );
      reached = undefined;
      await clock.nextAsync();
      timerSteps++;
      const mark = reached as Mark | undefined;
      if (mark !== undefined) {
        succeededAt.set(mark, succeeded);
        if (mark === 'firstHourEnd') firstHour = collectAndMeasure(clock.now);
        if (mark === 'dayEnd') lastHour = collectAndMeasure(clock.now);
      }
      await settle();
    }
  } finally {
    // Real timers first, so the shutdown's grace period can run out.
    clock.uninstall();
    await daemon.shutdown('SIGTERM');
  }
  if (firstHour === undefined) throw new Error('the first hour was never reached');
  return {
    firstHour,
    lastHour,
    rotations: {
      warmUp: count(succeededAt, 'dayStart'),
      firstHour: count(succeededAt, 'firstHourEnd') - count(succeededAt, 'dayStart'),
      lastHour: count(succeededAt, 'dayEnd') - count(succeededAt, 'lastHourStart'),
      day: count(succeededAt, 'dayEnd') - count(succeededAt, 'dayStart'),
    },
    failed,
    timerSteps,
    realSeconds: Math.round((performance.now() - began) / 100) / 10,
  };
}

const settingsArgument = process.argv[2];
if (settingsArgument === undefined)
  throw new Error('usage: node --expose-gc bench/daemon-day-run.ts <settings JSON>');
const report = await simulateDay(JSON.parse(settingsArgument) as DaemonDaySettings);
process.stdout.write(`${JSON.stringify(report)}\n`);
