// One fault case's world: the emulator in the test process (real loopback HTTP), a loopback
// webhook receiving every alert, a temp dir that is keyroll's working directory (the file
// backend writes under ./secrets), and every byte keyroll printed, for the leak scan.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Secret } from '../../src/audit/secret.ts';
import { createBackend } from '../../src/backends/registry.ts';
import type { Backend, StoreTarget } from '../../src/backends/types.ts';
import { startEmulator, type RunningEmulator, type StartEmulatorOptions } from '../../src/emulator/server.ts';
import { startReceiver, type Receiver } from '../support/alert-receiver.ts';
import { createTempDir } from '../support/temp-dir.ts';
import { spawnKeyroll, type ChildResult, type RunningChild, type SpawnOptions } from './b-child.ts';
import type { AlertSeen } from './record.ts';

export const ORG = 'org_demo_acme';
export const DEMO_KEYS = ['key_demo_billing', 'key_demo_search', 'key_demo_ingest'] as const;

/** A key of a fault policy and where the file backend `files` keeps it. */
export interface FaultKey {
  id: string;
  target: StoreTarget;
}

const JSON_SHAPE = {
  format: 'json',
  secretField: 'apiKey',
  fields: ['keyId', 'organizationId', 'rotatedAt'],
} as const;
const RAW_SHAPE = { format: 'raw', secretField: 'apiKey', fields: [] } as const;

/** Alternates JSON and raw values, so both renderings meet every fault. */
export function faultKey(id: string, index: number): FaultKey {
  return index % 2 === 0
    ? { id, target: { path: `${id}.json`, shape: { ...JSON_SHAPE, fields: [...JSON_SHAPE.fields] } } }
    : { id, target: { path: `${id}.key`, shape: { ...RAW_SHAPE, fields: [] } } };
}

export interface PolicyOptions {
  baseUrl: string;
  alertUrl: string;
  keys: readonly FaultKey[];
  lockTtl?: string;
  clockSkew?: string;
  headersMs?: number;
  bodyMs?: number;
}

/** A policy over `keys` of org_demo_acme in the file backend `files` (./secrets), alerts to the receiver. */
export function faultPolicyYaml(options: PolicyOptions): string {
  const keys = options.keys
    .map((key) => {
      const shape = key.target.shape.format === 'raw' ? ', shape: { format: raw }' : '';
      return `  - id: ${key.id}\n    organization: ${ORG}\n    destinations: [{ backend: files, path: ${key.target.path}${shape} }]\n`;
    })
    .join('');
  return `version: 1
api:
  baseUrl: ${options.baseUrl}
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
  rateLimitPerMinute: 60000
  timeouts: { headersMs: ${options.headersMs ?? 10_000}, bodyMs: ${options.bodyMs ?? 10_000} }
backends:
  files: { kind: file, directory: ./secrets }
alerts:
  sinks:
    hook: { kind: webhook, url: "${options.alertUrl}" }
defaults:
  schedule: "0 3 * * 1"
  timezone: UTC
  minInterval: 1h
  lockTtl: ${options.lockTtl ?? '15m'}
  clockSkew: ${options.clockSkew ?? '10s'}
  store: { attempts: 3, initialBackoff: 50ms, maxBackoff: 200ms }
keys:
${keys}`;
}

export interface FaultWorld {
  readonly emulator: RunningEmulator;
  readonly receiver: Receiver;
  readonly dir: string;
  /** The file backend `files`, opened in the test process to read (or seed) what keyroll keeps. */
  readonly files: Backend;
  /** Every stdout and stderr keyroll wrote in this world. */
  readonly outputs: string[];
  writeFile(name: string, text: string): Promise<string>;
  spawn(args: readonly string[], options?: Omit<SpawnOptions, 'cwd'>): RunningChild;
  run(args: readonly string[], options?: Omit<SpawnOptions, 'cwd'>): Promise<ChildResult>;
  /** Everything a secret must never appear in: keyroll's outputs and every alert body. */
  haystacks(): string[];
  /** The alerts the receiver got, reduced to what the checks compare. */
  alerts(): AlertSeen[];
  /** The secret stored for `key`, as its consumer reads it (undefined when nothing is stored). */
  storedSecret(key: FaultKey): Promise<string | undefined>;
  /** Stores the key's current emulator secret as if an earlier run had rotated it at `rotatedAt`. */
  seedRotated(key: FaultKey, rotatedAt: Date): Promise<void>;
  close(): Promise<void>;
}

export async function openWorld(emulatorOptions: StartEmulatorOptions = {}): Promise<FaultWorld> {
  const temp = await createTempDir('keyroll-faults-');
  const dir = temp.path;
  const emulator = await startEmulator({ port: 0, ...emulatorOptions });
  const receiver = await startReceiver();
  const files = await createBackend('files', { kind: 'file', directory: join(dir, 'secrets') });
  const outputs: string[] = [];
  const spawnIn = (args: readonly string[], options: Omit<SpawnOptions, 'cwd'> = {}): RunningChild => {
    const child = spawnKeyroll(args, { ...options, cwd: dir });
    void child.result.then((result) => outputs.push(result.stdout, result.stderr));
    return child;
  };
  return {
    emulator,
    receiver,
    dir,
    files,
    outputs,
    writeFile: async (name, text) => {
      const path = join(dir, name);
      await writeFile(path, text);
      return path;
    },
    spawn: spawnIn,
    run: async (args, options) => {
      const result = await spawnIn(args, options).result;
      return result;
    },
    haystacks: () => [...outputs, ...receiver.requests.map((request) => request.raw)],
    alerts: () =>
      receiver.requests
        .map((request) => request.body)
        .filter(
          (body): body is Record<string, unknown> =>
            typeof body === 'object' &&
            body !== null &&
            (body as Record<string, unknown>).event === 'rotation.failed',
        )
        .map((body) => ({
          ...(typeof body.keyId === 'string' ? { keyId: body.keyId } : {}),
          ...(typeof body.rotationId === 'string' ? { rotationId: body.rotationId } : {}),
          step: String(body.step),
          errorCode: String(body.errorCode),
          severity: String(body.severity),
        })),
    storedSecret: async (key) => (await files.readSecret(key.target))?.secret.reveal(),
    seedRotated: async (key, rotatedAt) => {
      const rotationId = `seed-${key.id}`;
      const written = await files.writeSecret(key.target, {
        secret: new Secret(emulator.state.currentSecret(key.id)),
        keyId: key.id,
        organizationId: ORG,
        rotationId,
        rotatedAt: rotatedAt.toISOString(),
      });
      await files.recordRotation(key.target, {
        rotationId,
        rotatedAt: rotatedAt.toISOString(),
        version: written.version,
      });
    },
    close: async () => {
      await files.close();
      await emulator.close();
      await receiver.close();
      await temp.remove();
    },
  };
}
