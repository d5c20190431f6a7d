// keyroll's Prometheus metrics (docs/metrics.md), on one prom-client registry per process: the
// daemon serves them on /metrics, `run` and `rotate` push them to a Pushgateway at the end.
// Every update happens after the fact (the engine calls the observer after the store, never
// between roll and store: invariant 2), and no label ever holds more than a key id. Series with
// a key id are per-key metrics (PER_KEY_METRICS): the daemon serves them only to a scraper with
// its metrics token, since key ids map the fleet for whoever reaches the port.
// Static imports only: a dynamic import() of this CommonJS package yields no named exports in the
// bundle the image runs (scripts/build.ts), so the daemon gets collectDefaultMetrics from here.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { AlertResult } from '../alerts/public/types.ts';
import { QUOTA_GROUPS } from '../backends/public/quota/groups.ts';
import type { BackendKind } from '../backends/public/types.ts';
import { CONSUMER_KINDS, CONSUMER_RESULTS, type ConsumerObserver } from '../consumers/public/types.ts';
import type {
  KeyOutcome,
  KeyResult,
  RotationObserver,
  RotationReason,
  RotationStep,
} from '../rotation/public/types.ts';

export { collectDefaultMetrics } from 'prom-client';

/**
 * Roll answer → durable write. A healthy write takes milliseconds to a few hundred; store
 * retries with backoff push it to seconds; anything past 30 s is an incident, not a bucket.
 */
export const EXPOSURE_BUCKETS_SECONDS: readonly number[] = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
];

/**
 * Leak report (or `rotate --leaked-secret-stdin`) → the API refusing the leaked value: a rotation
 * and its proof take seconds; a busy key lock or 429 waits stretch it to minutes.
 */
export const LEAK_TIME_TO_DEAD_BUCKETS_SECONDS: readonly number[] = [
  1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600,
];

/**
 * Store → the last consumer of the value refreshed: an ExternalSecret sync takes seconds, a
 * rollout seconds to minutes (image pulls, readiness probes, the cap on restarts at once).
 */
export const CONSUMERS_REFRESHED_BUCKETS_SECONDS: readonly number[] = [
  1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600,
];

/** Steps range from a local file write (ms) to a 429 wait inside the roll (minutes). */
export const STEP_BUCKETS_SECONDS: readonly number[] = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
];

export interface MetricsOptions {
  /** Where the metrics are registered; a fresh registry when omitted (never prom-client's global one). */
  registry?: Registry;
  /**
   * Register `keyroll_keys_overdue`. Only the daemon knows it (it reads every key's state on each
   * sweep); a one-shot run leaves it out rather than export a misleading 0.
   */
  overdue?: boolean;
  /**
   * Register `keyroll_keys_quarantined`. Known to the daemon (every sweep reads every key's state)
   * and to a scheduled `run` (it reads the state of every key in scope); `rotate` leaves it out.
   */
  quarantined?: boolean;
  /**
   * Register `keyroll_keys_drifted` and `keyroll_keys_locked`. Daemon only, like `overdue`: its
   * sweep reads every key's state (last drift probe, lock) each check interval.
   */
  sweepGauges?: boolean;
  /** Register `keyroll_leader`. Daemon only: whether this replica holds the Lease (docs/daemon.md, "Replicas"). */
  leader?: boolean;
  now?: () => Date;
}

export interface KeyrollMetrics {
  readonly registry: Registry;
  readonly rotations: Counter<'result' | 'reason'>;
  readonly stepDuration: Histogram<'step'>;
  readonly exposure: Histogram;
  readonly lastRotation: Gauge<'key_id'>;
  readonly keysOverdue: Gauge | undefined;
  readonly keysQuarantined: Gauge | undefined;
  readonly keysDrifted: Gauge | undefined;
  readonly keysLocked: Gauge | undefined;
  readonly maxAge: Gauge<'key_id'>;
  readonly leader: Gauge | undefined;
  readonly leakTimeToDead: Histogram;
  readonly alerts: Counter<'sink' | 'result'>;
  /** Daemon only: refused trigger requests by why, every one (the audit samples them). */
  readonly triggerRejections: Counter<'why'>;
  readonly consumerRefreshes: Counter<'kind' | 'result'>;
  readonly consumersRefreshed: Histogram;
  /** Hooks for the consumers' refresh (src/consumers/). */
  readonly consumerObserver: ConsumerObserver;
  /** Hooks for the rotation engine (RuntimeOptions.observer). */
  readonly observer: RotationObserver;
  /** Counts one key's outcome; a success also sets the key's last-rotation time to now. */
  recordOutcome(outcome: KeyOutcome, reason: RotationReason): void;
  /** The alerter's onResult hook. */
  recordAlert(sink: string, result: AlertResult): void;
  /** Starts each sink's sent and failed counts at 0 (so the first failed delivery is an increase). */
  knowSinks(sinks: readonly string[]): void;
  /**
   * Starts each backend's throttled and quota-wait counts at 0, per quota group of its kind (so the
   * first throttled request is an increase Prometheus sees, and the dashboard's panel has series).
   */
  knowBackends(backends: readonly { name: string; kind: BackendKind }[]): void;
  setOverdue(count: number): void;
  /** Keys quarantined after repeated failures (no automatic attempts until a person acts). */
  setQuarantined(count: number): void;
  /** Keys whose stored secret the last drift probe found dead, with no rotation since. */
  setDrifted(count: number): void;
  /** Keys whose backend lock a runner held when the sweep read them. */
  setLocked(count: number): void;
  /** 1 while this daemon runs the work that must run once (the Lease holder, or a daemon without a Lease). */
  setLeader(leading: boolean): void;
  /** The key's maxAge from the policy; a key without one has no series. */
  setMaxAge(keyId: string, maxAgeMs: number | undefined): void;
  /** A leaked value proven dead (the API answered 401), `ms` after keyroll learnt of the leak. */
  recordLeakDead(ms: number): void;
  /** Sets the key's last rotation from an ISO-8601 time (ignored when unparseable). */
  setLastRotation(keyId: string, isoTime: string): void;
  /** Drops a key's series (the key left the policy). */
  forgetKey(keyId: string): void;
  recordTriggerRejection(why: string): void;
  /** The Prometheus text; without `perKey`, every metric but those labelled with a key id. */
  exposition(options: { perKey: boolean }): Promise<string>;
}

/** Metrics whose series carry a `key_id` label. */
export const PER_KEY_METRICS: ReadonlySet<string> = new Set([
  'keyroll_key_last_rotation_timestamp_seconds',
  'keyroll_key_max_age_seconds',
]);

const SUCCESS: ReadonlySet<KeyResult> = new Set(['rotated', 'recovered']);

/** Every result a key outcome can have (a Record, so a new KeyResult without an entry fails the type check). */
const RESULTS: Record<KeyResult, true> = {
  rotated: true,
  recovered: true,
  failed: true,
  skipped: true,
  busy: true,
  aborted: true,
};
/** The reasons runs are started with (recovery and drift are steps inside a run, never its reason). */
export const RUN_REASONS: readonly RotationReason[] = [
  'scheduled',
  'leak',
  'compromise',
  'plan-change',
  'manual',
];
const ALERT_RESULTS: readonly AlertResult[] = ['sent', 'failed'];

// eslint-disable-next-line max-lines-per-function -- a table of metric definitions beside their one-line recorders; split, a metric would sit apart from what records it
export function createMetrics(options: MetricsOptions = {}): KeyrollMetrics {
  const registry = options.registry ?? new Registry();
  const now = options.now ?? (() => new Date());
  const rotations = new Counter({
    name: 'keyroll_rotations_total',
    help: 'Key rotations handled, by result (rotated, recovered, failed, skipped, busy, aborted) and reason (scheduled, leak, compromise, plan-change, manual).',
    labelNames: ['result', 'reason'] as const,
    registers: [registry],
  });
  const stepDuration = new Histogram({
    name: 'keyroll_rotation_step_duration_seconds',
    help: 'Time spent in each rotation step (preflight, lock, intent, roll, store, verify, finish).',
    labelNames: ['step'] as const,
    buckets: [...STEP_BUCKETS_SECONDS],
    registers: [registry],
  });
  const exposure = new Histogram({
    name: 'keyroll_secret_exposure_window_seconds',
    help: 'Time from the roll answer to the first durable write of the new secret: the only copy of the only working credential is in memory meanwhile.',
    buckets: [...EXPOSURE_BUCKETS_SECONDS],
    registers: [registry],
  });
  const lastRotation = new Gauge({
    name: 'keyroll_key_last_rotation_timestamp_seconds',
    help: 'Unix time of the last completed rotation of each key, as recorded in its primary destination.',
    labelNames: ['key_id'] as const,
    registers: [registry],
  });
  const keysOverdue =
    options.overdue === false
      ? undefined
      : new Gauge({
          name: 'keyroll_keys_overdue',
          help: 'Keys past their maxAge or more than one schedule period behind, from the state read on the last sweep.',
          registers: [registry],
        });
  const keysQuarantined =
    options.quarantined === false
      ? undefined
      : new Gauge({
          name: 'keyroll_keys_quarantined',
          help: 'Keys quarantined after failures.quarantineAfter consecutive failures: no automatic attempts until keyroll resume or a successful on-demand rotation.',
          registers: [registry],
        });
  const keysDrifted =
    options.sweepGauges === false
      ? undefined
      : new Gauge({
          name: 'keyroll_keys_drifted',
          help: 'Keys whose stored secret stopped working (rolled outside keyroll) and has not been healed by a rotation since, from the last sweep and the outcomes after it.',
          registers: [registry],
        });
  const keysLocked =
    options.sweepGauges === false
      ? undefined
      : new Gauge({
          name: 'keyroll_keys_locked',
          help: 'Keys whose backend lock was held by a runner (this daemon included) when the last sweep read their state.',
          registers: [registry],
        });
  const leader =
    options.leader === false
      ? undefined
      : new Gauge({
          name: 'keyroll_leader',
          help: 'Whether this daemon runs the work that must run once (schedules, sweeps, drift probes, owed restarts, the leak reconcile): 1 for the holder of the Lease, or a daemon without one; 0 for the other replicas.',
          registers: [registry],
        });
  const maxAge = new Gauge({
    name: 'keyroll_key_max_age_seconds',
    help: "Each key's maxAge from the policy (keys without one have no series): compare with keyroll_key_last_rotation_timestamp_seconds.",
    labelNames: ['key_id'] as const,
    registers: [registry],
  });
  const leakTimeToDead = new Histogram({
    name: 'keyroll_leak_time_to_dead_seconds',
    help: 'Time from a leak report (or rotate --leaked-secret-stdin) to the API refusing the leaked value (401), for every leaked value proven dead.',
    buckets: [...LEAK_TIME_TO_DEAD_BUCKETS_SECONDS],
    registers: [registry],
  });
  const alerts = new Counter({
    name: 'keyroll_alerts_total',
    help: 'Alert messages attempted per sink, by result (sent, failed).',
    labelNames: ['sink', 'result'] as const,
    registers: [registry],
  });

  const backendThrottled = new Counter({
    name: 'keyroll_backend_throttled_total',
    help: 'Backend requests refused for a request quota (AWS ThrottlingException, a Vault/OpenBao rate-limit 429) and waited out, by backend and quota group (aws: write, tag, read, create; vault: request).',
    labelNames: ['backend', 'group'] as const,
    registers: [registry],
  });
  const backendQuotaWait = new Counter({
    name: 'keyroll_backend_quota_wait_seconds_total',
    help: "Time backend requests waited for their turn in keyroll's own pacing of a request quota, by backend and quota group.",
    labelNames: ['backend', 'group'] as const,
    registers: [registry],
  });

  const triggerRejections = new Counter({
    name: 'keyroll_trigger_rejections_total',
    help: 'Refused POST /v1/rotations requests, by why (bad-signature, stale-timestamp, replay, ...); the audit trail records only a sample of them.',
    labelNames: ['why'] as const,
    registers: [registry],
  });

  const consumerRefreshes = new Counter({
    name: 'keyroll_consumer_refreshes_total',
    help: 'Consumers told of a new value, by kind (externalSecret, deployment, statefulSet, daemonSet, webhook) and result (refreshed, failed, deferred to the restart window, skipped: another runner restarted it).',
    labelNames: ['kind', 'result'] as const,
    registers: [registry],
  });
  const consumersRefreshed = new Histogram({
    name: 'keyroll_consumers_refreshed_seconds',
    help: 'Time from the store of a new value to the last of its consumers refreshed (synced, rolled out, notified), for every value all of whose consumers were refreshed.',
    buckets: [...CONSUMERS_REFRESHED_BUCKETS_SECONDS],
    registers: [registry],
  });

  // Every result and reason starts at 0: a counter series that first appears at 1 shows
  // Prometheus no increase, so the first failed leak rotation of a daemon would fire no alert.
  for (const result of Object.keys(RESULTS) as KeyResult[])
    for (const reason of RUN_REASONS) rotations.inc({ result, reason }, 0);
  for (const kind of CONSUMER_KINDS)
    for (const result of CONSUMER_RESULTS) consumerRefreshes.inc({ kind, result }, 0);

  const setLastRotation = (keyId: string, isoTime: string): void => {
    const ms = Date.parse(isoTime);
    if (!Number.isNaN(ms)) lastRotation.set({ key_id: keyId }, ms / 1000);
  };

  return {
    registry,
    rotations,
    stepDuration,
    exposure,
    lastRotation,
    keysOverdue,
    keysQuarantined,
    keysDrifted,
    keysLocked,
    maxAge,
    leader,
    leakTimeToDead,
    alerts,
    triggerRejections,
    consumerRefreshes,
    consumersRefreshed,
    consumerObserver: {
      consumerDone: (kind, result) => {
        consumerRefreshes.inc({ kind, result });
      },
      allRefreshed: (ms) => {
        consumersRefreshed.observe(Math.max(0, ms) / 1000);
      },
    },
    observer: {
      stepDuration: (step: RotationStep, ms: number) => {
        stepDuration.observe({ step }, Math.max(0, ms) / 1000);
      },
      exposure: (ms: number) => {
        exposure.observe(Math.max(0, ms) / 1000);
      },
      paced: (event) => {
        backendQuotaWait.inc(
          { backend: event.backend, group: event.group },
          Math.max(0, event.waitMs) / 1000,
        );
      },
      throttled: (event) => {
        backendThrottled.inc({ backend: event.backend, group: event.group });
      },
    },
    recordOutcome(outcome, reason) {
      // "Not due" is the answer for almost every key on almost every check; counting it would
      // bury the rotations that happened. Every key that was looked at under its lock counts.
      if (outcome.result === 'skipped' && outcome.detail === 'not-due') return;
      rotations.inc({ result: outcome.result, reason });
      if (SUCCESS.has(outcome.result)) setLastRotation(outcome.keyId, now().toISOString());
    },
    recordAlert(sink, result) {
      alerts.inc({ sink, result });
    },
    knowSinks(sinks) {
      for (const sink of sinks) for (const result of ALERT_RESULTS) alerts.inc({ sink, result }, 0);
    },
    knowBackends(backends) {
      for (const { name, kind } of backends) {
        for (const group of QUOTA_GROUPS[kind]) {
          backendThrottled.inc({ backend: name, group }, 0);
          backendQuotaWait.inc({ backend: name, group }, 0);
        }
      }
    },
    setOverdue(count) {
      keysOverdue?.set(count);
    },
    setQuarantined(count) {
      keysQuarantined?.set(count);
    },
    setDrifted(count) {
      keysDrifted?.set(count);
    },
    setLocked(count) {
      keysLocked?.set(count);
    },
    setLeader(leading) {
      leader?.set(leading ? 1 : 0);
    },
    setMaxAge(keyId, maxAgeMs) {
      if (maxAgeMs === undefined) maxAge.remove({ key_id: keyId });
      else maxAge.set({ key_id: keyId }, maxAgeMs / 1000);
    },
    recordLeakDead(ms) {
      leakTimeToDead.observe(Math.max(0, ms) / 1000);
    },
    setLastRotation,
    forgetKey(keyId) {
      lastRotation.remove({ key_id: keyId });
      maxAge.remove({ key_id: keyId });
    },
    recordTriggerRejection(why) {
      triggerRejections.inc({ why });
    },
    async exposition({ perKey }) {
      if (perKey) return registry.metrics();
      const shown = registry.getMetricsAsArray().filter((metric) => !PER_KEY_METRICS.has(metric.name));
      // The same joining as Registry.metrics() (Prometheus text format), one metric at a time.
      const texts = await Promise.all(shown.map((metric) => registry.getSingleMetricAsString(metric.name)));
      return `${texts.join('\n\n')}\n`;
    },
  };
}
