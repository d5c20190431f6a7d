// How a consumer's outcome is told (invariant 7, each on its own: invariant 12): one audit event
// per consumer, one alert per delivery naming every consumer that could not be refreshed with the
// commands a person runs by hand, and the metrics. Nothing here touches a rotation.
import type { Alerter } from '../alerts/public/types.ts';
import type { AuditLog } from '../audit/public/events.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { WORKLOAD_KINDS } from './kinds/workloads.ts';
import { consumerName, isWorkload, type ConsumerRef } from './refs.ts';
import type { ConsumerError } from './errors.ts';
import type { ConsumerObserver, ConsumerOutcome, DeliveryReport, StoredValue } from './types.ts';
import { typedCode } from '../errors.ts';

/** The audit fields naming a consumer: kind, namespace and name (or sink). */
export function consumerFields(consumer: ConsumerRef): Record<string, string> {
  return consumer.kind === 'webhook'
    ? { consumerKind: 'webhook', sink: consumer.sink }
    : { consumerKind: consumer.kind, namespace: consumer.namespace, name: consumer.name };
}

/** What a person runs to do by hand what keyroll could not. */
export function manualCommand(consumer: ConsumerRef, keyIds: readonly string[]): string {
  if (consumer.kind === 'webhook')
    return `tell the owner of webhook sink ${consumer.sink} that ${keyIds.join(', ')} has a new value (they drop their cache)`;
  if (consumer.kind === 'vaultStaticSecret')
    return `kubectl annotate vaultstaticsecret ${consumer.name} -n ${consumer.namespace} keyroll.io/sync-requested=$(date +%s) --overwrite`;
  if (consumer.kind === 'externalSecret')
    return `kubectl annotate externalsecret ${consumer.name} -n ${consumer.namespace} force-sync=$(date +%s) --overwrite`;
  const kubectl = isWorkload(consumer) ? WORKLOAD_KINDS[consumer.kind].kubectl : consumer.kind;
  return `kubectl rollout restart ${kubectl}/${consumer.name} -n ${consumer.namespace} && kubectl rollout status ${kubectl}/${consumer.name} -n ${consumer.namespace}`;
}

const CAUSE_HINT: Record<string, string> = {
  KR_CONSUMER_NOT_FOUND: 'the object does not exist: fix keys[].consumers in the policy, or create it',
  KR_CONSUMER_FORBIDDEN:
    "keyroll's service account may not act on it: add it to the chart's consumerAccess (get, patch and watch)",
  KR_CONSUMER_UNAUTHORIZED:
    "the API server refused keyroll's Kubernetes credential (an expired token, a wrong kubeconfig)",
  KR_CONSUMER_UNREACHABLE: 'the Kubernetes API server could not be reached',
  KR_CONSUMER_NO_CLIENT:
    'keyroll has no Kubernetes client configuration (consumers.kubernetes in the policy)',
  KR_CONSUMER_SYNC_FAILED: 'external-secrets cannot sync it: see kubectl describe externalsecret',
  KR_CONSUMER_API_UNSERVED:
    'the cluster serves no version of external-secrets.io keyroll speaks (v1, v1beta1): install or upgrade external-secrets (v0.14 or later)',
  KR_CONSUMER_FORCE_SYNC_OFF:
    "its refresh settings switch force-sync off (refreshInterval 0, or refreshPolicy CreatedOnce): set refreshPolicy: OnChange or a refreshInterval above 0 in the ExternalSecret's spec",
  KR_CONSUMER_SYNC_UNPROVABLE:
    'the VaultStaticSecret has hmacSecretData: false, so its status proves no sync: remove that setting (true is the default)',
  KR_CONSUMER_SYNC_BLOCKED:
    'not restarted, since an ExternalSecret it reads did not sync (its own failure says why) and its pods would start on the old value: sync that first',
  KR_CONSUMER_ROLLOUT_FAILED: 'its rollout cannot complete on its own: see kubectl rollout status',
  KR_CONSUMER_CONFLICT: 'the object kept changing under keyroll',
  KR_CONSUMER_TIMEOUT: 'it did not finish in time (consumers.syncTimeout, consumers.rolloutTimeout)',
  KR_CONSUMER_WEBHOOK_FAILED: 'the webhook sink did not take the notice',
};

export function nextActionFor(consumer: ConsumerRef, keyIds: readonly string[], errorCode: string): string {
  const hint = CAUSE_HINT[errorCode];
  return `${hint === undefined ? '' : `${hint}; then `}by hand: ${manualCommand(consumer, keyIds)}; the rotation stands (it is never rolled back or repeated for a consumer)`;
}

/** Audits each outcome (consumer.refreshed, .failed, .deferred, .skipped) and feeds the metrics. */
export function auditOutcomes(
  audit: AuditLog,
  deliveryId: string,
  outcomes: readonly ConsumerOutcome[],
  storedAtMs: (outcome: ConsumerOutcome) => number,
  observer: ConsumerObserver | undefined,
): void {
  for (const outcome of outcomes) {
    const base = {
      deliveryId,
      ...consumerFields(outcome.consumer),
      keyIds: outcome.keyIds,
      rotationIds: outcome.rotationIds,
    };
    const since = (ms: number | undefined): number | undefined =>
      ms === undefined ? undefined : Math.max(0, Math.round(ms - storedAtMs(outcome)));
    const timing = {
      ...(outcome.notifiedAtMs === undefined ? {} : { msToNotified: since(outcome.notifiedAtMs) }),
      ...(outcome.refreshedAtMs === undefined ? {} : { msToRefreshed: since(outcome.refreshedAtMs) }),
    };
    switch (outcome.result) {
      case 'refreshed':
        audit.emit('consumer.refreshed', {
          ...base,
          ...timing,
          ...(outcome.restartedBy === undefined ? {} : { restartedBy: outcome.restartedBy }),
        });
        break;
      case 'failed':
        audit.emit('consumer.failed', {
          ...base,
          ...timing,
          errorCode: outcome.errorCode,
          error: outcome.error,
          nextAction: outcome.nextAction,
        });
        break;
      case 'deferred':
        audit.emit('consumer.deferred', { ...base, nextAction: outcome.nextAction });
        break;
      case 'skipped':
        audit.emit('consumer.skipped', { ...base, why: 'already-restarted' });
        break;
    }
    observer?.consumerDone(outcome.consumer.kind, outcome.result);
  }
}

/** For each value all of whose consumers were refreshed: store → the last of them refreshed (the histogram). */
export function observeAllRefreshed(
  values: readonly StoredValue[],
  outcomes: readonly ConsumerOutcome[],
  observer: ConsumerObserver | undefined,
): void {
  if (observer === undefined) return;
  for (const value of values) {
    const mine = outcomes.filter((outcome) => outcome.rotationIds.includes(value.rotationId));
    if (
      mine.length === 0 ||
      mine.some((outcome) => outcome.result !== 'refreshed' || outcome.refreshedAtMs === undefined)
    )
      continue;
    observer.allRefreshed(Math.max(...mine.map((outcome) => outcome.refreshedAtMs ?? 0)) - value.storedAtMs);
  }
}

/** One alert for a delivery with failed consumers: which, why, and the commands to run by hand. */
export async function alertFailures(
  alerter: Alerter,
  report: DeliveryReport,
  keys: readonly KeyPolicy[],
): Promise<void> {
  const failed = report.outcomes.filter((outcome) => outcome.result === 'failed');
  const first = failed[0];
  if (first === undefined) return;
  const keyIds = [...new Set(failed.flatMap((outcome) => outcome.keyIds))];
  const involved = keys.filter((key) => keyIds.includes(key.id));
  const sinks = [...new Set(involved.flatMap((key) => key.notify.onFailure))];
  const single = involved.length === 1 ? involved[0] : undefined;
  const list = failed
    .map((outcome) => `${consumerName(outcome.consumer)} (${outcome.errorCode ?? 'failed'})`)
    .join(', ');
  await alerter.send(
    {
      severity: 'error',
      summary: `keyroll stored the new value of ${keyIds.join(', ')} but could not refresh ${String(failed.length)} of its consumers: ${list}; they may still hold the old value`,
      ...(single === undefined ? {} : { keyId: single.id, organizationId: single.organizationId }),
      // One alert per delivery, whatever else the rotation alerted: its own identity.
      rotationId: report.deliveryId,
      step: 'consumers',
      ...typedCode(first.errorCode ?? 'KR_CONSUMER_FAILED'),
      nextAction: failed
        .map(
          (outcome) =>
            `${consumerName(outcome.consumer)}: ${outcome.nextAction ?? manualCommand(outcome.consumer, outcome.keyIds)}`,
        )
        .join(' | '),
      details: {
        failed: failed.map((outcome) => ({
          consumer: consumerName(outcome.consumer),
          keyIds: outcome.keyIds,
          rotationIds: outcome.rotationIds,
          errorCode: outcome.errorCode,
          error: outcome.error,
        })),
      },
    },
    sinks.length > 0 ? sinks : undefined,
  );
}

/** Counts of a delivery's outcomes. */
export function reportOf(deliveryId: string, outcomes: ConsumerOutcome[]): DeliveryReport {
  const count = (result: ConsumerOutcome['result']): number =>
    outcomes.filter((outcome) => outcome.result === result).length;
  return {
    deliveryId,
    outcomes,
    refreshed: count('refreshed'),
    failed: count('failed'),
    deferred: count('deferred'),
    skipped: count('skipped'),
  };
}

export function keyIdsOf(values: readonly StoredValue[]): string[] {
  return [...new Set(values.map((value) => value.key.id))];
}

export function rotationIdsOf(values: readonly StoredValue[]): string[] {
  return values.map((value) => value.rotationId);
}

/** A consumer that could not be refreshed, with what to run by hand. */
export function failedOutcome(
  consumer: ConsumerRef,
  values: readonly StoredValue[],
  error: ConsumerError,
  notifiedAtMs?: number,
): ConsumerOutcome {
  const keyIds = keyIdsOf(values);
  return {
    consumer,
    result: 'failed',
    keyIds,
    rotationIds: rotationIdsOf(values),
    errorCode: error.code,
    error: error.message,
    nextAction: nextActionFor(consumer, keyIds, error.code),
    ...(notifiedAtMs === undefined ? {} : { notifiedAtMs }),
  };
}

/**
 * What a run did to consumers, for its summary line, its JSON report and its exit code: its own
 * delivery and the pick-up of restarts owed from earlier runs (a restart keyroll makes is never
 * left out). `owed` counts the pick-up's outcomes. Undefined when neither told any consumer.
 */
export interface RunConsumersReport {
  deliveryIds: string[];
  refreshed: number;
  failed: number;
  deferred: number;
  skipped: number;
  owed: number;
  /** Refreshed workloads Stakater Reloader restarted (keyroll proved the rollout). */
  restartedByReloader: number;
  outcomes: ConsumerOutcome[];
}

export function runConsumersReport(
  delivered: DeliveryReport | undefined,
  pickedUp: DeliveryReport | undefined,
): RunConsumersReport | undefined {
  const reports = [delivered, pickedUp].filter((report): report is DeliveryReport => report !== undefined);
  if (reports.length === 0) return undefined;
  const sum = (field: 'refreshed' | 'failed' | 'deferred' | 'skipped'): number =>
    reports.reduce((total, report) => total + report[field], 0);
  return {
    deliveryIds: reports.map((report) => report.deliveryId),
    refreshed: sum('refreshed'),
    failed: sum('failed'),
    deferred: sum('deferred'),
    skipped: sum('skipped'),
    owed: pickedUp?.outcomes.length ?? 0,
    restartedByReloader: reports
      .flatMap((report) => report.outcomes)
      .filter((outcome) => outcome.result === 'refreshed' && outcome.restartedBy === 'reloader').length,
    outcomes: reports.flatMap((report) => report.outcomes),
  };
}

/** `; consumers refreshed N[ (R restarted by Reloader)], failed M[, deferred D][, already restarted S][, owed from earlier runs O]` after a run's summary. */
export function consumersSummaryPart(report: RunConsumersReport | undefined): string {
  if (report === undefined) return '';
  const extra = [
    report.deferred > 0 ? `deferred ${String(report.deferred)}` : '',
    report.skipped > 0 ? `already restarted ${String(report.skipped)}` : '',
    report.owed > 0 ? `owed from earlier runs ${String(report.owed)}` : '',
  ].filter((part) => part !== '');
  const reloader =
    report.restartedByReloader > 0 ? ` (${String(report.restartedByReloader)} restarted by Reloader)` : '';
  return `; consumers refreshed ${String(report.refreshed)}${reloader}, failed ${String(report.failed)}${extra.length === 0 ? '' : `, ${extra.join(', ')}`}`;
}
