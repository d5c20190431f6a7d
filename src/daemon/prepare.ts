// Before a policy takes effect, at start and on every reload, everything it needs is made ready
// beside the one in force: the secrets its endpoints check requests with (and their replay
// records), then its generation (runtime, alerter). Any failure leaves the one in force untouched.
import { createAlerter } from '../alerts/public/alerter.ts';
import type { AuditLog } from '../audit/public/events.ts';
import { createRefresher } from '../consumers/public/create.ts';
import { errorCode, errorMessage } from '../errors.ts';
import { ReplayRecords } from '../inbound/public/replay-records.ts';
import { createMetrics, type KeyrollMetrics } from '../metrics/public/metrics.ts';
import type { Policy } from '../policy/public/schema.ts';
import { createRuntime, type RuntimeOptions } from '../rotation/public/runtime.ts';
import { Generation } from '../scheduler/public/generation.ts';
import { readEndpointSecrets, type EndpointSecrets } from './endpoint-secrets.ts';
import { DAEMON_DEFAULTS, type DaemonOptions } from './options.ts';

/** The options with their defaults, and what outlives every reload. */
export interface DaemonContext {
  readonly options: DaemonOptions;
  readonly audit: AuditLog;
  readonly now: () => Date;
  readonly env: NodeJS.ProcessEnv;
  readonly metrics: KeyrollMetrics;
  readonly concurrency: number;
  readonly graceMs: number;
  readonly checkIntervalMs: number;
  /** One record per signed source; undefined without a state directory or a shared store. */
  readonly replays: ReplayRecords | undefined;
  /** Aborted when shutdown begins: rotations not started are skipped, consumer waits end. */
  readonly shutdown: AbortController;
}

/** A policy ready to take effect: every secret its endpoints need read, its runtime built. */
export interface Prepared {
  generation: Generation;
  secrets: EndpointSecrets;
}

/** The options with their defaults filled in; the metrics and replay records made once for the daemon's life. */
export function daemonContext(options: DaemonOptions): DaemonContext {
  const now = options.now ?? (() => new Date());
  return {
    options,
    audit: options.audit,
    now,
    env: options.env ?? process.env,
    metrics: options.metrics ?? createMetrics({ now }),
    concurrency: options.concurrency ?? DAEMON_DEFAULTS.concurrency,
    graceMs: options.graceMs ?? DAEMON_DEFAULTS.graceMs,
    checkIntervalMs: options.checkIntervalMs ?? DAEMON_DEFAULTS.checkIntervalMs,
    // One record per source (inbound/replay-records.ts), each opened before its endpoint serves:
    // shared by every replica when a replay store is given, else in this daemon's state directory.
    replays: replayRecordsOf(options, now),
    shutdown: new AbortController(),
  };
}

function replayRecordsOf(options: DaemonOptions, now: () => Date): ReplayRecords | undefined {
  const nowSeconds = (): number => Math.floor(now().getTime() / 1000);
  if (options.replayStore !== undefined) return new ReplayRecords(options.replayStore, nowSeconds);
  return options.stateDir === undefined
    ? undefined
    : new ReplayRecords({ kind: 'file', dir: options.stateDir }, nowSeconds);
}

/**
 * Everything a policy needs before it takes effect, at start and on every reload: the secrets its
 * endpoints check requests with and their replay records, then its generation (runtime, alerter).
 */
export async function prepare(context: DaemonContext, policy: Policy): Promise<Prepared> {
  const { options, audit, env, now, metrics } = context;
  const secrets = await readEndpointSecrets(policy, {
    triggerKeys: options.triggerKeys ?? [],
    metricsTokenRef: options.metricsTokenRef,
    replays: context.replays,
    env,
  });
  metrics.knowSinks(Object.keys(policy.alerts.sinks));
  metrics.knowBackends(
    Object.entries(policy.backends).map(([name, config]) => ({ name, kind: config.kind })),
  );
  const alerter =
    options.runtime?.alerter ??
    createAlerter({
      sinks: policy.alerts.sinks,
      audit,
      env,
      now,
      onResult: (sink, result) => {
        metrics.recordAlert(sink, result);
      },
    });
  const runtimeOptions: RuntimeOptions = {
    audit,
    env,
    now,
    ...options.runtime,
    observer: metrics.observer,
    alerter,
  };
  const runtime = await createRuntime(policy, runtimeOptions);
  const refresher = createRefresher(policy, {
    alerter: runtime.alerter,
    notifier: runtime.notifier,
    env,
    now,
    observer: metrics.consumerObserver,
    signal: context.shutdown.signal,
    ...(options.kubeClient ? { kubeClient: options.kubeClient } : {}),
  });
  const generation = new Generation(
    policy,
    runtime,
    (error) => {
      reportFailure(audit, 'runtime-close', error);
    },
    refresher,
  );
  return { generation, secrets };
}

/** `daemon.failed`: something the daemon does on its own (a sweep, a tick, a readiness check) failed unexpectedly. */
export function reportFailure(
  audit: AuditLog,
  what: string,
  error: unknown,
  extra: Record<string, unknown> = {},
): void {
  audit.emit('daemon.failed', { what, errorCode: errorCode(error), message: errorMessage(error), ...extra });
}
