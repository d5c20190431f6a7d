// A rotation test bench: the emulator over real loopback HTTP, file backends in a temp dir,
// a recording alerter and a memory audit log. Tests wrap backends to inject faults.
import { join } from 'node:path';
import { staticCredential } from '../../src/api/credentials.ts';
import type { Alert, Alerter } from '../../src/alerts/types.ts';
import { createAuditLog, type AuditRecord, type FlushableAuditLog } from '../../src/audit/logger.ts';
import { Secret } from '../../src/audit/secret.ts';
import type { Backend, ValueShape } from '../../src/backends/types.ts';
import { startEmulator, type RunningEmulator } from '../../src/emulator/server.ts';
import type { KeyPolicy, Policy } from '../../src/policy/schema.ts';
import { createRuntime, type Runtime, type RuntimeOptions } from '../../src/rotation/runtime.ts';
import { runRotations, type RunSummary } from '../../src/rotation/run.ts';
import type { RunTrigger } from '../../src/rotation/types.ts';
import { createTempDir } from '../support/temp-dir.ts';

export const DEMO_KEYS = ['key_demo_billing', 'key_demo_search', 'key_demo_ingest'] as const;
export const OWNER_TOKEN = 'demo-owner-token';

export class RecordingAlerter implements Alerter {
  readonly alerts: { alert: Alert; sinks?: readonly string[] }[] = [];
  send(alert: Alert, sinks?: readonly string[]): Promise<void> {
    this.alerts.push({ alert, ...(sinks ? { sinks } : {}) });
    return Promise.resolve();
  }
}

export const JSON_SHAPE: ValueShape = {
  format: 'json',
  secretField: 'apiKey',
  fields: ['keyId', 'organizationId', 'rotatedAt', 'rotationId'],
};

export interface Bench {
  emulator: RunningEmulator;
  dir: string;
  audit: FlushableAuditLog;
  /** Every audit line so far, parsed (after redaction and sanitizing). */
  events(): AuditRecord[];
  /** The raw audit lines, as they would reach stdout. */
  lines: string[];
  /** Observe each audit line as it is written (synchronously). */
  onAuditLine(hook: ((line: string) => void) | undefined): void;
  alerter: RecordingAlerter;
  policy: Policy;
  key(id: string): KeyPolicy;
  orgOf(keyId: string): string;
  runtime(options?: Partial<RuntimeOptions>): Promise<Runtime>;
  run(options?: {
    keys?: string[];
    trigger?: Partial<RunTrigger>;
    runtime?: Partial<RuntimeOptions>;
    concurrency?: number;
  }): Promise<RunSummary>;
  close(): Promise<void>;
}

export function keyPolicy(id: string, organizationId: string, overrides: Partial<KeyPolicy> = {}): KeyPolicy {
  return {
    id,
    organizationId,
    destinations: [{ backend: 'files', target: { path: `${id}.json`, shape: JSON_SHAPE } }],
    fallbacks: [],
    timezone: 'UTC',
    maxAgeMs: 30 * 24 * 3600_000,
    minIntervalMs: 3600_000,
    lockTtlMs: 60_000,
    clockSkewMs: 0,
    verify: { readBack: true, apiCall: true },
    store: { attempts: 3, initialBackoffMs: 1, maxBackoffMs: 2 },
    notify: { onFailure: [], onSuccess: [] },
    labels: {},
    onDrift: 'rotate',
    ...overrides,
  };
}

export async function startBench(
  options: { keys?: (org: (keyId: string) => string) => KeyPolicy[]; policy?: Partial<Policy> } = {},
): Promise<Bench> {
  const emulator = await startEmulator({ port: 0 });
  const temp = await createTempDir('keyroll-rotation-');
  const dir = temp.path;
  const lines: string[] = [];
  let lineHook: ((line: string) => void) | undefined;
  const audit = createAuditLog({
    destination: {
      write(line: string): void {
        lines.push(line);
        lineHook?.(line);
      },
    },
  });
  const alerter = new RecordingAlerter();
  const orgOf = (keyId: string): string => {
    return emulator.state.apiKey(keyId).organizationId;
  };
  const keys = options.keys ? options.keys(orgOf) : DEMO_KEYS.map((id) => keyPolicy(id, orgOf(id)));
  const policy: Policy = {
    file: 'test-policy.yaml',
    api: {
      baseUrl: emulator.url,
      credential: { type: 'bearer', token: 'env:KEYROLL_TEST_UNUSED' },
      methods: { roll: 'POST', listProjects: 'GET', updateProject: 'PATCH', updateConsent: 'PATCH' },
      timeouts: { headersMs: 2_000, bodyMs: 2_000 },
      rateLimitPerMinute: 6_000,
    },
    backends: {
      files: { kind: 'file', directory: join(dir, 'secrets') },
      fallback: { kind: 'file', directory: join(dir, 'fallback') },
    },
    alerts: { sinks: {} },
    keys,
    ...options.policy,
  };
  // Every runtime handed out and not yet closed: the bench closes them when it closes, so a test
  // that fails before its own close, or leaves a runner hanging at a gate on purpose (a runner
  // that died mid-roll), leaves no API pool or backend client open behind it.
  const open = new Set<Runtime>();
  const runtime = async (overrides: Partial<RuntimeOptions> = {}): Promise<Runtime> => {
    const created = await createRuntime(policy, {
      audit,
      alerter,
      credentials: staticCredential(new Secret(OWNER_TOKEN), 'test owner token'),
      sleep: () => Promise.resolve(),
      ...overrides,
    });
    const closeOnce = created.close.bind(created);
    open.add(created);
    created.close = async () => {
      if (!open.delete(created)) return;
      await closeOnce();
    };
    return created;
  };
  return {
    emulator,
    dir,
    audit,
    events: () => lines.map((line) => JSON.parse(line) as AuditRecord),
    lines,
    onAuditLine: (hook) => {
      lineHook = hook;
    },
    alerter,
    policy,
    orgOf,
    key: (id) => {
      const found = policy.keys.find((k) => k.id === id);
      if (!found) throw new Error(`no key ${id}`);
      return found;
    },
    runtime,
    run: async (opts = {}) => {
      const rt = await runtime(opts.runtime);
      try {
        const keys = opts.keys ? policy.keys.filter((k) => opts.keys?.includes(k.id)) : policy.keys;
        return await runRotations(rt, {
          keys,
          trigger: { reason: 'scheduled', force: false, ...opts.trigger },
          concurrency: opts.concurrency ?? 1,
        });
      } finally {
        await rt.close();
      }
    },
    close: async () => {
      for (const left of [...open]) await left.close();
      await emulator.close();
      await temp.remove();
    },
  };
}

/** A backend wrapper that lets a test fail or observe chosen calls. */
export function wrapBackend(
  inner: Backend,
  hooks: Partial<{
    [K in keyof Backend]: NonNullable<Backend[K]> extends (...args: infer A) => infer R
      ? (next: () => R, ...args: A) => R
      : never;
  }>,
): Backend {
  const wrapped: Record<string, unknown> = {};
  const required = [
    'preflight',
    'acquireLock',
    'refreshLock',
    'releaseLock',
    'setIntent',
    'clearIntent',
    'writeSecret',
    'readSecret',
    'readState',
    'recordRotation',
    'recordProbe',
    'recordFailure',
    'close',
  ] as const;
  // The optional methods stay optional: a wrapped backend has exactly those the inner one has.
  const optional = (['ensureFresh', 'reserveWrite', 'reserveLockRefresh', 'readPrevious'] as const).filter(
    (name) => inner[name] !== undefined,
  );
  for (const name of [...required, ...optional]) {
    const hook = hooks[name] as ((next: () => unknown, ...args: unknown[]) => unknown) | undefined;
    const original = (inner[name] as (...args: unknown[]) => unknown).bind(inner);
    wrapped[name] = hook ? (...args: unknown[]) => hook(() => original(...args), ...args) : original;
  }
  return Object.assign(Object.create(null) as object, wrapped, {
    kind: inner.kind,
    name: inner.name,
  }) as unknown as Backend;
}
