// A daemon test bench: the emulator over real loopback HTTP, a policy file and a file backend in a
// temp dir, a memory audit log and a recording alerter. The daemon is started in-process with the
// emulator's owner token, so the tests exercise everything but the process boundary.
// useDaemonBench() is the set-up of the daemon tests: a fresh bench per test, closed after it.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { staticCredential } from '../../src/api/credentials.ts';
import { createMemoryAuditLog, type AuditRecord, type MemoryAuditLog } from '../../src/audit/logger.ts';
import { Secret } from '../../src/audit/secret.ts';
import type { AuditEventName } from '../../src/audit/events.ts';
import { startEmulator, type RunningEmulator, type StartEmulatorOptions } from '../../src/emulator/server.ts';
import { Daemon } from '../../src/daemon/daemon.ts';
import type { DaemonOptions } from '../../src/daemon/options.ts';
import { randomBytes } from 'node:crypto';
import { signTriggerRequest } from '../../src/scheduler/trigger-auth.ts';
import type { TriggerKeySpec } from '../../src/scheduler/trigger-keys.ts';
import { RecordingAlerter } from '../rotation/harness.ts';
import { afterEach, beforeEach, vi } from 'vitest';
import { currentOf } from './current.ts';
import { expectNoSecrets } from './secret-scan.ts';
import { createTempDir } from './temp-dir.ts';

export const ORG = 'org_demo_acme';
export const OWNER_TOKEN = 'demo-owner-token';
/** alice's trigger key (the default caller of postTrigger), and bob's. */
export const TRIGGER_SECRET = 'trigger-hmac-key-of-alice-for-tests-0123456789';
export const BOB_TRIGGER_SECRET = 'trigger-hmac-key-of-bob-for-the-tests-9876543210';
/** The bearer token of /metrics' per-key series when a test passes `metricsTokenRef: 'env:KEYROLL_METRICS_TOKEN'`. */
export const METRICS_TOKEN = 'metrics-bearer-token-for-the-tests-000111';
/** Pass as `triggerKeys` to enable the trigger with the callers alice and bob. */
export const TRIGGER_KEYS: readonly TriggerKeySpec[] = [
  { caller: 'alice', ref: 'env:KEYROLL_TRIGGER_KEY_ALICE' },
  { caller: 'bob', ref: 'env:KEYROLL_TRIGGER_KEY_BOB' },
];

/** One key entry of the test policy (YAML list item). */
export function keyYaml(id: string, settings: string, path = `${id}.json`): string {
  return `  - id: ${id}
    organization: ${ORG}
    destinations: [{ backend: files, path: ${path} }]
${settings
  .split('\n')
  .filter((line) => line.trim() !== '')
  .map((line) => `    ${line.trim()}`)
  .join('\n')}
`;
}

export function policyYaml(baseUrl: string, secretsDir: string, keys: string): string {
  return `version: 1
api:
  baseUrl: ${baseUrl}
  credential: { type: bearer, token: env:KEYROLL_TEST_UNUSED }
  rateLimitPerMinute: 6000
backends:
  files: { kind: file, directory: ${JSON.stringify(secretsDir)} }
defaults:
  timezone: UTC
  minInterval: 1h
  store: { attempts: 2, initialBackoff: 1ms, maxBackoff: 2ms }
keys:
${keys}`;
}

export interface DaemonBench {
  readonly emulator: RunningEmulator;
  readonly dir: string;
  readonly secretsDir: string;
  readonly policyFile: string;
  /** The daemons' state directory (the trigger's replay record), shared by every daemon of the bench. */
  readonly stateDir: string;
  readonly audit: MemoryAuditLog;
  readonly alerter: RecordingAlerter;
  /** Writes the policy file with these key entries. */
  writePolicy(keys: string): Promise<void>;
  /** Writes raw text as the policy file (e.g. an invalid one). */
  writePolicyText(text: string): Promise<void>;
  start(options?: Partial<DaemonOptions>): Promise<Daemon>;
  /** The apiKey stored for `keyId` (JSON shape, file `<keyId>.json`). */
  storedSecret(keyId: string): Promise<string>;
  events(name: AuditEventName): AuditRecord[];
  close(): Promise<void>;
}

export async function startDaemonBench(emulatorOptions: StartEmulatorOptions = {}): Promise<DaemonBench> {
  const emulator = await startEmulator({ port: 0, ...emulatorOptions });
  const temp = await createTempDir('keyroll-daemon-');
  const dir = temp.path;
  const secretsDir = join(dir, 'secrets');
  const policyFile = join(dir, 'policy.yaml');
  const stateDir = join(dir, 'state');
  // Reads Date.now at each line, so audit times follow a fake clock installed later.
  const audit = createMemoryAuditLog({ now: () => Date.now() });
  const alerter = new RecordingAlerter();
  const daemons: Daemon[] = [];
  return {
    emulator,
    dir,
    secretsDir,
    policyFile,
    stateDir,
    audit,
    alerter,
    writePolicy: (keys) => writeFile(policyFile, policyYaml(emulator.url, secretsDir, keys)),
    writePolicyText: (text) => writeFile(policyFile, text),
    start: async (options = {}) => {
      const daemon = await Daemon.start({
        policyFile,
        listen: { host: '127.0.0.1', port: 0 },
        audit,
        checkIntervalMs: 24 * 3600_000,
        concurrency: 1,
        stateDir,
        env: {
          KEYROLL_TRIGGER_KEY_ALICE: TRIGGER_SECRET,
          KEYROLL_TRIGGER_KEY_BOB: BOB_TRIGGER_SECRET,
          KEYROLL_METRICS_TOKEN: METRICS_TOKEN,
        },
        ...options,
        runtime: {
          credentials: staticCredential(new Secret(OWNER_TOKEN), 'test owner token'),
          sleep: () => Promise.resolve(),
          alerter,
          ...options.runtime,
        },
      });
      daemons.push(daemon);
      return daemon;
    },
    storedSecret: async (keyId) =>
      (JSON.parse(await readFile(join(secretsDir, `${keyId}.json`), 'utf8')) as { apiKey: string }).apiKey,
    events: (name) => audit.eventsNamed(name),
    // Invariant 3: no minted secret, nor keyroll's token or the trigger secret, in any audit line or alert.
    close: async () => {
      try {
        for (const daemon of daemons) await daemon.shutdown();
        expectNoSecrets(
          [...audit.lines, ...alerter.alerts.map((a) => JSON.stringify(a))],
          [...emulator.state.mintedSecrets(), OWNER_TOKEN, TRIGGER_SECRET, BOB_TRIGGER_SECRET, METRICS_TOKEN],
        );
      } finally {
        await emulator.close();
        await temp.remove();
      }
    },
  };
}

/**
 * Call at the top of a file (or inside a describe block): a fresh bench before each test, closed
 * after it (every daemon shut down, invariant 3 checked), with real timers back first so the
 * daemons can stop. The returned bench stands for the running test's; a file's own hooks that
 * use it come after this call, and its afterEach hooks then run before the close.
 */
export function useDaemonBench(): DaemonBench {
  let bench: DaemonBench | undefined;
  beforeEach(async () => {
    bench = await startDaemonBench();
  });
  afterEach(async () => {
    vi.useRealTimers();
    await bench?.close();
    bench = undefined;
  });
  return currentOf('useDaemonBench', () => bench);
}

export interface SignedPost {
  body: string;
  /** alice by default. */
  caller?: string;
  timestamp?: number;
  /** A fresh random nonce by default. */
  nonce?: string;
  /** The caller's own key by default. */
  secret?: string;
  signature?: string;
}

/** The headers a leak responder's script sends: caller, timestamp, nonce and signature. */
export function signedHeaders(request: SignedPost): Record<string, string> {
  const caller = request.caller ?? 'alice';
  const timestamp = request.timestamp ?? Math.floor(Date.now() / 1000);
  const nonce = request.nonce ?? randomBytes(16).toString('hex');
  const secret = request.secret ?? (caller === 'bob' ? BOB_TRIGGER_SECRET : TRIGGER_SECRET);
  const signature =
    request.signature ?? signTriggerRequest(new Secret(secret), timestamp, nonce, request.body);
  return {
    'x-keyroll-caller': caller,
    'x-keyroll-timestamp': String(timestamp),
    'x-keyroll-nonce': nonce,
    'x-keyroll-signature': signature,
  };
}

/** POSTs a trigger request signed like a leak responder's script would. */
export async function postTrigger(
  daemon: Daemon,
  request: SignedPost,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`${daemon.url}/v1/rotations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...signedHeaders(request) },
    body: request.body,
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

/** A promise the test resolves by hand: a backend write or an API answer waits on it. */
export interface Gate {
  /** Resolves when something reached the gate. */
  reached: Promise<void>;
  /** Lets whatever waits at the gate go on. */
  open(): void;
  wait(): Promise<void>;
}

export function createGate(): Gate {
  const reached = Promise.withResolvers<undefined>();
  const opened = Promise.withResolvers<undefined>();
  return {
    reached: reached.promise.then(() => undefined),
    open: () => {
      opened.resolve(undefined);
    },
    wait: async () => {
      reached.resolve(undefined);
      await opened.promise;
    },
  };
}
