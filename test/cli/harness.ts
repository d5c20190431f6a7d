// The CLI as an operator runs it: `node src/cli/entry.ts …` as a child process, against an
// in-process emulator (real loopback HTTP), a policy file and a file backend in a fresh temp
// dir, and a loopback webhook receiver that records every alert. After each test, every byte the
// child wrote (stdout, stderr) and every alert body is scanned for the secrets the emulator
// minted and for keyroll's own token (invariant 3).
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach } from 'vitest';
import type { AuditRecord } from '../../src/audit/logger.ts';
import { createBackend } from '../../src/backends/registry.ts';
import type { Backend, StoreTarget } from '../../src/backends/types.ts';
import { startEmulator, type RunningEmulator, type StartEmulatorOptions } from '../../src/emulator/server.ts';
import { startReceiver, type Receiver } from '../support/alert-receiver.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { useTempDir } from '../support/temp-dir.ts';

export const ENTRY = fileURLToPath(new URL('../../src/cli/entry.ts', import.meta.url));
export const BIN = fileURLToPath(new URL('../../bin/keyroll', import.meta.url));
/** The emulator seed's owner principal (a demo-only fixture token). */
export const OWNER_TOKEN = 'demo-owner-token';
export const ORG = 'org_demo_acme';
export const DEMO_KEYS = ['key_demo_billing', 'key_demo_search', 'key_demo_ingest'] as const;

export interface CliResult {
  /** Exit code; null when the child died of a signal. */
  code: number | null;
  stdout: string;
  stderr: string;
  /** Audit events: the stdout lines that are JSON objects with an `event`. */
  events: AuditRecord[];
  /** The last non-empty stdout line (`rotated N, failed M, skipped K` for run and rotate). */
  lastLine: string;
}

export interface RunningCli {
  child: ChildProcess;
  /** Resolves once stderr has contained `text` (e.g. the shutdown notice). */
  stderrIncludes(text: string): Promise<void>;
  result: Promise<CliResult>;
}

export interface CliOptions {
  /** Variables added to (or, with undefined, removed from) the child's environment. */
  env?: Record<string, string | undefined>;
  /** Run through bin/keyroll instead of node + entry.ts. */
  viaBin?: boolean;
  /** Run this entry (e.g. a bundled dist/cli/entry.js) with node instead of src/cli/entry.ts. */
  entry?: string;
  /** Written to the child's stdin, which is then closed (default: stdin is empty). */
  stdin?: string;
}

/** The child's environment: PATH and HOME only, plus keyroll's token; nothing from the test's own shell. */
function childEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    KEYROLL_API_TOKEN: OWNER_TOKEN,
  };
  for (const [name, value] of Object.entries(extra)) {
    if (value === undefined) Reflect.deleteProperty(env, name);
    else env[name] = value;
  }
  return env;
}

function parseEvents(stdout: string): AuditRecord[] {
  const events: AuditRecord[] = [];
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const parsed = JSON.parse(line) as Record<string, unknown>;
      if (typeof parsed.event === 'string') events.push(parsed as AuditRecord);
    } catch {
      // Multi-line JSON output (status/plan/validate -o json) is not an audit line.
    }
  }
  return events;
}

export function spawnCli(args: readonly string[], cwd: string, options: CliOptions = {}): RunningCli {
  const [command, argv] = options.viaBin
    ? [BIN, [...args]]
    : [process.execPath, [options.entry ?? ENTRY, ...args]];
  const child = spawn(command, argv, { cwd, env: childEnv(options.env), stdio: ['pipe', 'pipe', 'pipe'] });
  // Closed at once: without `stdin`, the child reads end of input (as from /dev/null).
  child.stdin.end(options.stdin ?? '');
  let stdout = '';
  let stderr = '';
  const stderrWaiters: { text: string; resolve: () => void }[] = [];
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString('utf8');
  });
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString('utf8');
    for (const waiter of stderrWaiters.filter((w) => stderr.includes(w.text))) {
      stderrWaiters.splice(stderrWaiters.indexOf(waiter), 1);
      waiter.resolve();
    }
  });
  const result = new Promise<CliResult>((resolve, reject) => {
    child.on('error', reject);
    // 'close' (not 'exit'): every byte of stdout and stderr has been read by then.
    child.on('close', (code) => {
      const lines = stdout.split('\n').filter((line) => line.trim() !== '');
      resolve({ code, stdout, stderr, events: parseEvents(stdout), lastLine: lines.at(-1) ?? '' });
    });
  });
  return {
    child,
    result,
    stderrIncludes: (text) =>
      stderr.includes(text)
        ? Promise.resolve()
        : new Promise<void>((resolve, reject) => {
            stderrWaiters.push({ text, resolve });
            void result.then(() => {
              reject(
                new Error(`the CLI exited without printing ${JSON.stringify(text)} on stderr:\n${stderr}`),
              );
            });
          }),
  };
}

export interface PolicyOptions {
  baseUrl: string;
  /** Webhook receiving every failure alert. */
  alertUrl?: string;
  /** Extra key entries (YAML, indented as list items under `keys:`). */
  extraKeys?: string;
  /** Extra backends (YAML, indented as map entries under `backends:`). */
  extraBackends?: string;
  /** Replaces the `credential:` value (flow YAML). */
  credential?: string;
  /** age recipients of an escrow directory ./escrow (no escrow without). */
  escrowRecipients?: string[];
  /** Extra settings under `defaults:` (YAML, indented by two spaces). */
  extraDefaults?: string;
}

/**
 * The policy the command tests run: the three demo keys of org_demo_acme in a file backend
 * under ./secrets, weekly default schedule (Mondays 03:00 UTC), a one-hour minimum interval.
 * billing has a 7-day maxAge as well; ingest is rotated by age alone (30 days).
 */
export function policyYaml(options: PolicyOptions): string {
  const alerts =
    options.alertUrl === undefined
      ? ''
      : `alerts:\n  sinks:\n    hook: { kind: webhook, url: "${options.alertUrl}" }\n`;
  const escrow =
    options.escrowRecipients === undefined
      ? ''
      : `escrow:\n  directory: ./escrow\n  recipients: [${options.escrowRecipients.join(', ')}]\n`;
  return `version: 1
api:
  baseUrl: ${options.baseUrl}
  credential: ${options.credential ?? '{ type: bearer, token: env:KEYROLL_API_TOKEN }'}
  rateLimitPerMinute: 6000
backends:
  files: { kind: file, directory: ./secrets }
${options.extraBackends ?? ''}${alerts}${escrow}defaults:
  schedule: "0 3 * * 1"
  timezone: UTC
  minInterval: 1h
${options.extraDefaults ?? ''}keys:
  - id: key_demo_billing
    organization: ${ORG}
    destinations: [{ backend: files, path: billing.json }]
    maxAge: 7d
  - id: key_demo_search
    organization: ${ORG}
    destinations: [{ backend: files, path: search.key, shape: { format: raw } }]
  - id: key_demo_ingest
    organization: ${ORG}
    destinations: [{ backend: files, path: ingest.json }]
    schedule: null
    maxAge: 30d
${options.extraKeys ?? ''}`;
}

export interface CliFixture {
  readonly emulator: RunningEmulator;
  readonly receiver: Receiver;
  /** The test's temp dir: the CLI's working directory; the file backend writes to ./secrets. */
  readonly dir: string;
  readonly secretsDir: string;
  /** Writes the standard policy (with the alert webhook) as policy.yaml, or `text` as `name`. */
  writePolicy(overrides?: Partial<PolicyOptions>, name?: string): Promise<string>;
  writeFile(name: string, text: string): Promise<string>;
  run(args: readonly string[], options?: CliOptions): Promise<CliResult>;
  spawn(args: readonly string[], options?: CliOptions): RunningCli;
  /** Secrets the leak scan must also look for (e.g. an API key handed to keyroll as its credential). */
  alsoSecret(value: string): void;
}

/**
 * Registers beforeEach/afterEach in the calling file: a fresh emulator, receiver and temp dir per
 * test, and the leak scan over everything the test's CLI runs printed.
 */
export function useCliFixture(emulatorOptions: StartEmulatorOptions = {}): CliFixture {
  // Registered before the hooks below: the directory exists when they start, and goes after they end.
  const temp = useTempDir('keyroll-cli-');
  let emulator: RunningEmulator | undefined;
  let receiver: Receiver | undefined;
  let outputs: string[] = [];
  let extraSecrets: string[] = [];
  const need = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`${what} is only available inside a test`);
    return value;
  };

  beforeEach(async () => {
    emulator = await startEmulator({ port: 0, ...emulatorOptions });
    receiver = await startReceiver();
    outputs = [];
    extraSecrets = [];
  });

  afterEach(async () => {
    try {
      if (emulator) {
        const secrets = [...emulator.state.mintedSecrets(), OWNER_TOKEN, ...extraSecrets];
        const written = [...outputs, ...(receiver?.requests.map((r) => r.raw) ?? [])];
        expectNoSecrets(written, secrets);
      }
    } finally {
      await emulator?.close();
      await receiver?.close();
      emulator = undefined;
      receiver = undefined;
    }
  });

  const fixture: CliFixture = {
    get emulator() {
      return need(emulator, 'the emulator');
    },
    get receiver() {
      return need(receiver, 'the alert receiver');
    },
    get dir() {
      return temp.path();
    },
    get secretsDir() {
      return join(temp.path(), 'secrets');
    },
    writePolicy: async (overrides = {}, name = 'policy.yaml') =>
      fixture.writeFile(
        name,
        policyYaml({
          baseUrl: fixture.emulator.url,
          alertUrl: `${fixture.receiver.url}/alerts`,
          ...overrides,
        }),
      ),
    writeFile: async (name, text) => {
      const path = join(fixture.dir, name);
      await writeFile(path, text);
      return path;
    },
    spawn: (args, options) => {
      const running = spawnCli(args, fixture.dir, options);
      void running.result.then((r) => outputs.push(r.stdout, r.stderr));
      return running;
    },
    run: async (args, options) => {
      const result = await spawnCli(args, fixture.dir, options).result;
      outputs.push(result.stdout, result.stderr);
      return result;
    },
    alsoSecret: (value) => {
      extraSecrets.push(value);
    },
  };
  return fixture;
}

/** Resolves with the first stdout audit event named `event` of a running CLI (complete lines only). */
export function nextEvent(running: RunningCli, event: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let buffer = '';
    const onData = (chunk: Buffer): void => {
      buffer += chunk.toString('utf8');
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      const line = lines.find((l) => l.includes(`"event":"${event}"`));
      if (line === undefined) return;
      running.child.stdout?.off('data', onData);
      resolve(JSON.parse(line) as Record<string, unknown>);
    };
    running.child.stdout?.on('data', onData);
    void running.result.then((result) => {
      reject(
        new Error(
          `the process exited (${String(result.code)}) before writing ${event}: ${result.stderr.slice(-500)}`,
        ),
      );
    });
  });
}

export function eventsNamed(result: CliResult, name: string): AuditRecord[] {
  return result.events.filter((e) => e.event === name);
}

export interface FileSnapshot {
  sha256: string;
  mtimeMs: number;
  mode: number;
}

/** Every file under `root` with its content hash, mtime and mode (relative paths). */
export async function snapshotTree(root: string): Promise<Record<string, FileSnapshot>> {
  const snapshot: Record<string, FileSnapshot> = {};
  let entries;
  try {
    entries = await readdir(root, { recursive: true, withFileTypes: true });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return snapshot;
    throw error;
  }
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    const [content, info] = await Promise.all([readFile(path), stat(path)]);
    snapshot[relative(root, path)] = {
      sha256: createHash('sha256').update(content).digest('hex'),
      mtimeMs: info.mtimeMs,
      mode: info.mode,
    };
  }
  return snapshot;
}

/** The file backend the policy calls `files`, opened in the test process (to set up state behind the CLI's back). */
export async function openFileBackend(secretsDir: string): Promise<Backend> {
  return createBackend('files', { kind: 'file', directory: secretsDir });
}

/** The destination of each key in the standard policy. */
export const TARGETS: Record<(typeof DEMO_KEYS)[number], StoreTarget> = {
  key_demo_billing: {
    path: 'billing.json',
    shape: { format: 'json', secretField: 'apiKey', fields: ['keyId', 'organizationId', 'rotatedAt'] },
  },
  key_demo_search: { path: 'search.key', shape: { format: 'raw', secretField: 'apiKey', fields: [] } },
  key_demo_ingest: {
    path: 'ingest.json',
    shape: { format: 'json', secretField: 'apiKey', fields: ['keyId', 'organizationId', 'rotatedAt'] },
  },
};

/** The secret stored for a key of the standard policy, as its consumer reads it. */
export async function storedSecret(secretsDir: string, keyId: (typeof DEMO_KEYS)[number]): Promise<string> {
  const text = await readFile(join(secretsDir, TARGETS[keyId].path), 'utf8');
  return TARGETS[keyId].shape.format === 'raw' ? text : (JSON.parse(text) as { apiKey: string }).apiKey;
}

/**
 * Holds the emulator's `delay` faults until the test releases them: pass `gate.sleep` as the
 * emulator's `sleep`, queue a delay fault, await `reached()` (the call is at the API), act, then
 * `release()`. `reset()` before each test.
 */
export interface DelayGate {
  readonly sleep: (ms: number) => Promise<void>;
  readonly reached: () => Promise<void>;
  readonly release: () => void;
  readonly reset: () => void;
}

export function createDelayGate(): DelayGate {
  let reached = Promise.withResolvers<undefined>();
  let released = Promise.withResolvers<undefined>();
  return {
    sleep: async () => {
      reached.resolve(undefined);
      await released.promise;
    },
    reached: () => reached.promise,
    release: () => {
      released.resolve(undefined);
    },
    reset: () => {
      reached = Promise.withResolvers();
      released = Promise.withResolvers();
    },
  };
}
