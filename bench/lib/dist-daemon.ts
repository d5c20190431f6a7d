// `keyroll daemon` as the image runs it, for a benchmark that measures a long-lived daemon from
// outside: a child process of the bundled dist/ with the Node flags of the Dockerfile's
// ENTRYPOINT and the environment of its ENV (as bench/lib/cli.ts's runCli), its audit trail (JSON
// lines on stdout) counted by event, its RSS read from /proc while it runs.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { imageEnv, imageNodeFlags } from '../../test/support/image-runtime.ts';
import { BENCH_COMPILE_CACHE, childEnv, ENTRIES } from './cli.ts';

export interface DistDaemon {
  child: ChildProcess;
  /** Audit events seen so far, by name. */
  events: Map<string, number>;
  /** When (performance.now(), as its line arrived) each of the TIMED events came. */
  times: Map<string, number[]>;
  /** The last audit lines of failure events and stderr lines, for an error message. */
  tail: string[];
  /** Resolves with the first audit record of this event (e.g. daemon.started). */
  waitFor(event: string, timeoutMs: number): Promise<Record<string, unknown>>;
  /** The process's resident set size now and its peak (VmRSS, VmHWM), MB. */
  memory(): Promise<{ rssMb: number; peakMb: number }>;
  /** CPU time the process used so far (user + system), seconds. */
  cpuSeconds(): Promise<number>;
  /** SIGTERM, then the exit code (SIGKILL after `graceMs`). */
  stop(graceMs?: number): Promise<number | null>;
}

/** Events whose times are kept: the generations swapped in, the watches synced. */
const TIMED = new Set(['policy.reloaded', 'policy.reload_failed', 'crd.watch.synced', 'daemon.started']);
const FAILURES = /"event":"(key\.failed|crd\.status\.failed|crd\.watch\.failed|policy\.reload_failed)"/;

export function startDistDaemon(options: {
  args: readonly string[];
  env: Record<string, string>;
  cwd: string;
}): DistDaemon {
  if (!existsSync(ENTRIES.dist))
    throw new Error(`${ENTRIES.dist} is missing: run \`npm run --silent build\` (npm run bench does)`);
  const child = spawn(process.execPath, [...imageNodeFlags(), ENTRIES.dist, 'daemon', ...options.args], {
    cwd: options.cwd,
    env: childEnv({ ...imageEnv(), NODE_COMPILE_CACHE: BENCH_COMPILE_CACHE, ...options.env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const events = new Map<string, number>();
  const times = new Map<string, number[]>();
  const tail: string[] = [];
  const keep = (line: string): void => {
    tail.push(line.slice(0, 600));
    if (tail.length > 30) tail.shift();
  };
  const waiters = new Map<string, ((record: Record<string, unknown>) => void)[]>();
  createInterface({ input: child.stdout }).on('line', (line) => {
    let record: Record<string, unknown>;
    try {
      record = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    const name = typeof record.event === 'string' ? record.event : '(none)';
    events.set(name, (events.get(name) ?? 0) + 1);
    if (TIMED.has(name)) times.set(name, [...(times.get(name) ?? []), performance.now()]);
    if (FAILURES.test(line)) keep(line);
    for (const resolve of waiters.get(name) ?? []) resolve(record);
    waiters.delete(name);
  });
  createInterface({ input: child.stderr }).on('line', keep);
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  return {
    child,
    events,
    times,
    tail,
    waitFor: (event, timeoutMs) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(
            new Error(`no ${event} from the daemon within ${String(timeoutMs)} ms:\n${tail.join('\n')}`),
          );
        }, timeoutMs);
        void exited.then((code) => {
          clearTimeout(timer);
          reject(new Error(`the daemon exited ${String(code)} before ${event}:\n${tail.join('\n')}`));
        });
        waiters.set(event, [
          ...(waiters.get(event) ?? []),
          (record) => {
            clearTimeout(timer);
            resolve(record);
          },
        ]);
      }),
    memory: async () => {
      const status = await readFile(`/proc/${String(child.pid)}/status`, 'utf8');
      const kb = (field: string): number =>
        Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]);
      return { rssMb: kb('VmRSS') / 1024, peakMb: kb('VmHWM') / 1024 };
    },
    cpuSeconds: async () => {
      // Fields 14 and 15 of /proc/PID/stat (utime, stime) in clock ticks (USER_HZ, 100 on Linux);
      // the name (field 2) may hold spaces, so count from its closing parenthesis.
      const stat = await readFile(`/proc/${String(child.pid)}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return (Number(fields[11]) + Number(fields[12])) / 100;
    },
    stop: async (graceMs = 30_000) => {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
