// keyroll as the operator runs it, for the crash, concurrency and generated-input cases:
// `node src/cli/entry.ts …` as a child process with a bare environment (PATH, HOME, keyroll's
// token), its stdout and stderr captured whole, and a way to wait for a line on stderr (the
// crash tests' pause points) or to SIGKILL it.
import { spawn, type ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ENTRY = fileURLToPath(new URL('../../src/cli/entry.ts', import.meta.url));
/** The emulator seed's owner principal (a demo-only fixture token, not a secret of any system). */
export const OWNER_TOKEN = 'demo-owner-token';
// Node's compile cache shared by every child of the suite: hundreds of keyroll processes start
// here, and compiling the sources once instead of each time halves their start-up.
const COMPILE_CACHE = join(tmpdir(), 'keyroll-faults-compile-cache');
const SUMMARY = /^rotated (\d+), failed (\d+), skipped (\d+)( \(aborted: .*\))?$/;

export interface ChildResult {
  /** Exit code; null when the process died of a signal. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** The stdout lines that are audit events (JSON objects with an `event`). */
  events: Record<string, unknown>[];
  /** The last non-empty stdout line. */
  lastLine: string;
  /** The parsed `rotated N, failed M, skipped K` line, when the last line is one. */
  summary?: { rotated: number; failed: number; skipped: number; aborted: boolean };
  /** Wall time from spawn to exit. */
  elapsedMs: number;
}

export interface RunningChild {
  readonly process: ChildProcess;
  /** How many times `text` has appeared on stderr so far. */
  stderrCount(text: string): number;
  /** The audit events printed on stdout so far (a daemon's, while it runs). */
  eventsSoFar(): Record<string, unknown>[];
  /** Resolves once `text` has appeared `times` times on stderr; rejects when the child exits first. */
  waitForStderr(text: string, times?: number): Promise<void>;
  /** SIGKILL, then the result once every byte was read. */
  kill(): Promise<ChildResult>;
  readonly result: Promise<ChildResult>;
}

export interface SpawnOptions {
  cwd: string;
  /** Added to (undefined: removed from) the bare environment. */
  env?: Record<string, string | undefined>;
  /** The child is SIGKILLed past this and the result says so (a hang is a failure, not a stuck suite). */
  killAfterMs?: number;
}

function childEnv(extra: Record<string, string | undefined>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    KEYROLL_API_TOKEN: OWNER_TOKEN,
    NODE_COMPILE_CACHE: COMPILE_CACHE,
  };
  for (const [name, value] of Object.entries(extra)) {
    if (value === undefined) Reflect.deleteProperty(env, name);
    else env[name] = value;
  }
  return env;
}

export function parseAuditLines(stdout: string): Record<string, unknown>[] {
  const events: Record<string, unknown>[] = [];
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const parsed = JSON.parse(line) as Record<string, unknown>;
      if (typeof parsed.event === 'string') events.push(parsed);
    } catch {
      // `rotate -o json` prints its report as one JSON line without `event`; other text is not audit.
    }
  }
  return events;
}

export function parseSummary(line: string): ChildResult['summary'] {
  const match = SUMMARY.exec(line);
  if (!match) return undefined;
  return {
    rotated: Number(match[1]),
    failed: Number(match[2]),
    skipped: Number(match[3]),
    aborted: match[4] !== undefined,
  };
}

export function spawnKeyroll(args: readonly string[], options: SpawnOptions): RunningChild {
  const started = performance.now();
  const child = spawn(process.execPath, [ENTRY, ...args], {
    cwd: options.cwd,
    env: childEnv(options.env ?? {}),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  const waiters: { text: string; times: number; resolve: () => void }[] = [];
  const count = (text: string): number => stderr.split(text).length - 1;
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
    for (const waiter of waiters.filter((w) => count(w.text) >= w.times)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  });
  const watchdog =
    options.killAfterMs === undefined
      ? undefined
      : setTimeout(() => child.kill('SIGKILL'), options.killAfterMs);
  const result = new Promise<ChildResult>((resolve, reject) => {
    child.on('error', reject);
    // 'close', not 'exit': by then every byte of stdout and stderr has been read.
    child.on('close', (code, signal) => {
      if (watchdog) clearTimeout(watchdog);
      const lines = stdout.split('\n').filter((line) => line.trim() !== '');
      const lastLine = lines.at(-1) ?? '';
      const summary = parseSummary(lastLine);
      resolve({
        code,
        signal,
        stdout,
        stderr,
        events: parseAuditLines(stdout),
        lastLine,
        ...(summary ? { summary } : {}),
        elapsedMs: performance.now() - started,
      });
    });
  });
  return {
    process: child,
    result,
    stderrCount: count,
    eventsSoFar: () => parseAuditLines(stdout.slice(0, stdout.lastIndexOf('\n') + 1)),
    waitForStderr: (text, times = 1) =>
      count(text) >= times
        ? Promise.resolve()
        : new Promise<void>((resolve, reject) => {
            waiters.push({ text, times, resolve });
            void result.then((r) => {
              reject(
                new Error(
                  `keyroll exited (code ${String(r.code)}) before printing ${JSON.stringify(text)} ${times} time(s); stderr:\n${r.stderr}`,
                ),
              );
            });
          }),
    kill: async () => {
      child.kill('SIGKILL');
      return result;
    },
  };
}
