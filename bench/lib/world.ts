// The world a benchmark rotates in: the emulator with N fresh API keys of the demo enterprise
// organization, a temp working directory, and a policy file naming those keys. Everything is on
// 127.0.0.1; nothing here talks to any other host.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startEmulator, type RunningEmulator } from '../../src/emulator/server.ts';

/** The emulator seed's owner principal: a public demo-only fixture token, valid nowhere else. */
export const OWNER_TOKEN = 'demo-owner-token';
/** The seed's enterprise organization (API keys allowed, highest per-key rate). */
export const ORG = 'org_demo_acme';

export interface BenchKey {
  id: string;
  /** Backend instance name in the policy. */
  backend: string;
  path: string;
  /** A cron schedule of the key's own (croner syntax). */
  schedule?: string;
  /** A two-slot entry: `id` names the entry, these are its two API keys. */
  slots?: readonly [string, string];
  /** Slot entries: the policy's consumerRefresh (a duration, e.g. 5s). */
  consumerRefresh?: string;
  /** The key's consumers, as flow YAML (e.g. `[{ kind: webhook, sink: cache-drop }]`). */
  consumers?: string;
}

export interface PolicyOptions {
  baseUrl: string;
  /** keyroll's client-side ceiling (api.rateLimitPerMinute). */
  rateLimitPerMinute: number;
  /** YAML map entries under `backends:`, each line indented by two spaces. */
  backends: string;
  keys: readonly BenchKey[];
  /** YAML map entries under `defaults:`, each line indented by two spaces. */
  defaults?: string;
  /** YAML map entries under `alerts.sinks:`, each line indented by four spaces. */
  sinks?: string;
}

/** One flow-style line per key, so a 1,000-key policy stays a readable file. */
export function policyYaml(options: PolicyOptions): string {
  const keys = options.keys
    .map((key) => {
      const slots =
        key.slots === undefined
          ? ''
          : `, slots: [${key.slots.join(', ')}]${key.consumerRefresh === undefined ? '' : `, consumerRefresh: ${key.consumerRefresh}`}`;
      return `  - { id: ${key.id}, organization: ${ORG}${slots}, destinations: [{ backend: ${key.backend}, path: ${key.path} }]${key.schedule === undefined ? '' : `, schedule: "${key.schedule}"`}${key.consumers === undefined ? '' : `, consumers: ${key.consumers}`} }`;
    })
    .join('\n');
  return `version: 1
api:
  baseUrl: ${options.baseUrl}
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
  rateLimitPerMinute: ${String(options.rateLimitPerMinute)}
backends:
${options.backends}
${options.sinks === undefined ? '' : `alerts:\n  sinks:\n${options.sinks}\n`}defaults:
${options.defaults ?? '  maxAge: 30d\n  minInterval: 1h'}
keys:
${keys}
`;
}

export interface World {
  emulator: RunningEmulator;
  dir: string;
  /** Adds `count` API keys to the emulator; ids are `${prefix}${index}` (zero-padded). */
  addKeys(prefix: string, count: number): string[];
  writePolicy(name: string, options: Omit<PolicyOptions, 'baseUrl'>): Promise<string>;
  close(): Promise<void>;
}

export interface WorldOptions {
  /** The emulator's roll limit for OAuth/session principals (the bench's owner token). */
  rollRateLimitPerMinute: number;
  /**
   * Enforce that limit as a token bucket holding this many seconds of the rate, so going faster
   * than the rate meets 429 within a second; default: the emulator's clock-minute windows.
   */
  rollRateBurstSeconds?: number;
}

export async function startWorld(options: WorldOptions): Promise<World> {
  const dir = await mkdtemp(join(tmpdir(), 'keyroll-bench-'));
  const emulator = await startEmulator({
    port: 0,
    rollRateLimitPerMinute: options.rollRateLimitPerMinute,
    ...(options.rollRateBurstSeconds === undefined
      ? {}
      : { rollRateBurstSeconds: options.rollRateBurstSeconds }),
  });
  return {
    emulator,
    dir,
    addKeys(prefix, count) {
      const width = String(count - 1).length;
      return Array.from({ length: count }, (_, index) => {
        const id = `${prefix}${String(index).padStart(width, '0')}`;
        emulator.state.addApiKey({ id, name: id, organizationId: ORG });
        return id;
      });
    },
    async writePolicy(name, policy) {
      const file = join(dir, name);
      await writeFile(file, policyYaml({ baseUrl: emulator.url, ...policy }));
      return file;
    },
    async close() {
      await emulator.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
