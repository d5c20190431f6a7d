// Metrics for one-shot commands (`run` and `rotate` with --pushgateway URL): the same metric
// definitions as the daemon, wired into the runtime, pushed once when the run is over (after the
// last store, so never inside the exposure window: invariant 2). A failed push is audited as a
// warning and changes nothing else: the exit code reports the rotations, not the monitoring.
import { createAlerter } from '../alerts/public/alerter.ts';
import type { AuditLog } from '../audit/public/events.ts';
import { errorCode, errorMessage, KeyrollError } from '../errors.ts';
import type { PlainHttpEndpoint } from '../policy/public/endpoints.ts';
import type { Policy } from '../policy/public/schema.ts';
import { insecureHttpHost } from '../http/public/transport.ts';
import type { RuntimeOptions } from '../rotation/public/runtime.ts';
import type { KeyOutcome, RotationReason } from '../rotation/public/types.ts';
import { createMetrics, type KeyrollMetrics } from './metrics.ts';
import { parsePushgatewayUrl, pushMetrics, type PushOptions } from './pushgateway.ts';

/** The Pushgateway job name of every keyroll push; the `command` (and `shard`) grouping labels tell runs apart. */
export const PUSH_JOB_NAME = 'keyroll';

export interface RunMetricsExport {
  readonly metrics: KeyrollMetrics;
  /** Spread into createRuntime's options: the metrics observer and an alerter that counts. */
  readonly runtimeOptions: Pick<RuntimeOptions, 'observer' | 'alerter'>;
  /** For RunOptions.onKeyDone. */
  readonly onKeyDone: (outcome: KeyOutcome) => void;
  /** Pushes once; never throws. False when the push failed (audited as `metrics.push_failed`). */
  push(groupings: Readonly<Record<string, string>>): Promise<boolean>;
}

export interface PushgatewayExport {
  /** The gateway, when --pushgateway-allow-insecure-http lets it use plain http:// to another machine (the run warns at start). */
  readonly plainHttp: readonly PlainHttpEndpoint[];
  /** Builds the metrics of one run, pushed to the validated URL. */
  start(policy: Policy, audit: AuditLog, reason: RotationReason): RunMetricsExport;
}

/** Validates the --pushgateway URL before anything runs (a bad one is a usage error, exit 2). */
export function preparePushgateway(
  gatewayUrl: string,
  options: Omit<PushOptions, 'groupings'> & { env?: NodeJS.ProcessEnv } = {},
): PushgatewayExport {
  const url = parsePushgatewayUrl(gatewayUrl, options);
  const { env = process.env, ...pushOptions } = options;
  const host = insecureHttpHost(url);
  return {
    plainHttp: host === undefined ? [] : [{ endpoint: '--pushgateway', host }],
    start(policy, audit, reason) {
      // A scheduled run reads every key's state in scope, so it knows which are quarantined; an
      // on-demand `rotate` reads none and leaves the gauge out rather than claim zero.
      const scheduled = reason === 'scheduled';
      const metrics = createMetrics({
        overdue: false,
        quarantined: scheduled,
        sweepGauges: false,
        leader: false,
      });
      const maxAges = new Map(policy.keys.map((key) => [key.id, key.maxAgeMs]));
      const quarantined = new Set<string>();
      const alerter = createAlerter({
        sinks: policy.alerts.sinks,
        audit,
        env,
        onResult: (sink, result) => {
          metrics.recordAlert(sink, result);
        },
      });
      return {
        metrics,
        runtimeOptions: { observer: metrics.observer, alerter },
        onKeyDone: (outcome) => {
          metrics.recordOutcome(outcome, reason);
          // Beside its last rotation, so "time since the last rotation against maxAge" has both.
          metrics.setMaxAge(outcome.keyId, maxAges.get(outcome.keyId));
          if (!scheduled) return;
          if (outcome.quarantinedAt === undefined) quarantined.delete(outcome.keyId);
          else quarantined.add(outcome.keyId);
          metrics.setQuarantined(quarantined.size);
        },
        async push(groupings) {
          try {
            await pushMetrics(gatewayUrl, PUSH_JOB_NAME, metrics.registry, { ...pushOptions, groupings });
            return true;
          } catch (error) {
            const fields =
              error instanceof KeyrollError
                ? error.toFields()
                : { errorCode: errorCode(error), errorMessage: errorMessage(error) };
            audit.emit('metrics.push_failed', { ...fields, job: PUSH_JOB_NAME, groupings });
            return false;
          }
        },
      };
    },
  };
}
