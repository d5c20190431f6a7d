// One run's share of the consumers' refresh (refresher.ts): `storedBeforeVerify` hears a single
// key right after its store (its webhook consumers are told then: the value they hold died at the
// roll), `stored` hears each key as its rotation ends (the other webhooks are told then: a
// consumer outside Kubernetes drops its cache while the run goes on), `finish` does the rest once
// every key of the run is stored: each ExternalSecret synced, then each workload restarted once
// (invariant 12). Each sink hears of a rotation once.
import { randomUUID } from 'node:crypto';
import type { NoticeResult } from '../alerts/public/notify.ts';
import type { NoticeStage } from '../alerts/public/types.ts';
import type { AuditLog } from '../audit/public/events.ts';
import { errorMessage } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import type { KeyOutcome } from '../rotation/public/types.ts';
import { refreshUrgency } from './need.ts';
import { planDelivery, policyOrder } from './plan.ts';
import type { ConsumerRefresher } from './refresher.ts';
import { inRefreshSpan, timeNotices, traceNotices, type TimedNotices } from './trace.ts';
import { consumerName } from './refs.ts';
import { consumerFields, nextActionFor } from './report.ts';
import type { ConsumerOutcome, DeliveryReport, StoredValue } from './types.ts';

/**
 * One run's share: `storedBeforeVerify` hears a single key at its store, `stored` each key as it
 * ends (webhooks are told at once), `finish` does the rest once every key of the run is stored:
 * syncs, then restarts.
 */
export class Delivery {
  readonly #refresher: ConsumerRefresher;
  readonly #audit: AuditLog;
  readonly #keys: readonly KeyPolicy[];
  readonly #deliveryId = randomUUID();
  readonly #startedAtMs: number;
  /** Every new value of the run: what the histogram measures from. */
  readonly #values: StoredValue[] = [];
  /** Values whose Kubernetes consumers must pick them up. */
  readonly #forKubernetes: StoredValue[] = [];
  readonly #webhooks: Promise<TimedNotices>[] = [];
  /** Rotation id → the sinks already told of it (at the store): not told again at the end. */
  readonly #told = new Map<string, ReadonlySet<string>>();

  constructor(refresher: ConsumerRefresher, audit: AuditLog, keys: readonly KeyPolicy[]) {
    this.#refresher = refresher;
    this.#audit = audit.child({});
    this.#keys = keys;
    this.#startedAtMs = refresher.now().getTime();
  }

  get deliveryId(): string {
    return this.#deliveryId;
  }

  /**
   * A single key's value is stored, verify still to come (RotationDeps.onStored): its webhook
   * consumers are told now, the notice sent but not awaited (finish waits for it). Never throws.
   */
  storedBeforeVerify(key: KeyPolicy, outcome: KeyOutcome): void {
    // A two-slot entry's previous value still works (invariant 10): its notice waits for the end.
    if (key.slots !== undefined) return;
    const value = storedValue(key, outcome, 'stored');
    if (value?.urgency === undefined) return;
    const sinks = webhookConsumerSinks(key);
    if (sinks.length === 0 || this.#told.has(value.rotationId)) return;
    const stored: StoredValue = { ...value, urgency: value.urgency };
    this.#told.set(stored.rotationId, new Set(sinks));
    this.#values.push(stored);
    this.#webhooks.push(timeNotices(this.#notify(stored, sinks)));
  }

  /** A key of the run ended. Never throws. */
  stored(key: KeyPolicy, outcome: KeyOutcome): void {
    const value = storedValue(key, outcome, 'finished');
    if (value === undefined) return;
    const { urgency } = value;
    const told = this.#told.get(value.rotationId);
    // notify.onSuccess sinks hear of every new value; webhook consumers of the ones they must pick
    // up. A sink told at the store is not told again.
    const sinks = [
      ...new Set([...key.notify.onSuccess, ...(urgency === undefined ? [] : webhookConsumerSinks(key))]),
    ].filter((sink) => told?.has(sink) !== true);
    const known = this.#values.find((candidate) => candidate.rotationId === value.rotationId);
    const stored: StoredValue = known ?? { ...value, urgency: urgency ?? 'window' };
    if (sinks.length > 0) {
      if (known === undefined) this.#values.push(stored);
      this.#webhooks.push(timeNotices(this.#notify({ ...stored, notice: value.notice }, sinks)));
    }
    if (urgency !== undefined && (key.consumers ?? []).some((consumer) => consumer.kind !== 'webhook')) {
      if (!this.#values.includes(stored)) this.#values.push(stored);
      this.#forKubernetes.push(stored);
    }
  }

  /** Syncs and restarts for the run's values; undefined when no consumer was concerned. Never throws. */
  async finish(): Promise<DeliveryReport | undefined> {
    const notices = await Promise.all(this.#webhooks);
    if (this.#values.length === 0) return undefined;
    const what = {
      source: 'run' as const,
      deliveryId: this.#deliveryId,
      keyIds: [...new Set(this.#values.map((value) => value.key.id))],
      rotationIds: this.#values.map((value) => value.rotationId),
    };
    const firstNotice =
      notices.length === 0 ? undefined : Math.min(...notices.map((notice) => notice.startMs));
    return inRefreshSpan(what, () => this.#refresh(notices), firstNotice);
  }

  async #refresh(notices: readonly TimedNotices[]): Promise<DeliveryReport | undefined> {
    traceNotices(notices);
    const webhookOutcomes = notices.flatMap((notice) => notice.outcomes);
    let kubeOutcomes: ConsumerOutcome[] = [];
    if (this.#forKubernetes.length > 0) {
      const plan = planDelivery(this.#forKubernetes, policyOrder(this.#keys));
      this.#audit.emit('consumers.started', {
        deliveryId: this.#deliveryId,
        keyIds: [...new Set(this.#forKubernetes.map((value) => value.key.id))],
        rotationIds: this.#forKubernetes.map((value) => value.rotationId),
        externalSecrets: plan.syncs.map((target) => consumerName(target.consumer)),
        workloads: plan.restarts.map((target) => consumerName(target.consumer)),
        urgent: this.#forKubernetes.some((value) => value.urgency === 'now'),
      });
      kubeOutcomes = await this.#refresher.deliverToKubernetes(plan, this.#audit, this.#deliveryId, {
        recordOwed: true,
      });
    }
    const outcomes = [...webhookOutcomes, ...kubeOutcomes];
    if (outcomes.length === 0) return undefined;
    return this.#refresher.finishDelivery(
      this.#audit,
      this.#deliveryId,
      this.#values,
      outcomes,
      this.#keys,
      this.#startedAtMs,
    );
  }

  async #notify(value: StoredValue, sinks: readonly string[]): Promise<ConsumerOutcome[]> {
    let results: NoticeResult[];
    try {
      results = await this.#refresher.notifier.withAudit(this.#audit).notifySuccess(value.notice, sinks);
    } catch (error) {
      results = sinks.map((sink) => ({
        sink,
        sent: false,
        errorCode: 'KR_UNEXPECTED',
        error: errorMessage(error),
      }));
    }
    const atMs = this.#refresher.now().getTime();
    return results.map((result): ConsumerOutcome => {
      const consumer = { kind: 'webhook' as const, sink: result.sink };
      const ids = { keyIds: [value.key.id], rotationIds: [value.rotationId] };
      if (result.sent) {
        this.#audit.emit('consumer.notified', {
          deliveryId: this.#deliveryId,
          ...consumerFields(consumer),
          ...ids,
          msToNotified: Math.max(0, Math.round(atMs - value.storedAtMs)),
        });
        return { consumer, result: 'refreshed', ...ids, notifiedAtMs: atMs, refreshedAtMs: atMs };
      }
      const error = `the notice was not delivered (${result.foreignCode ?? result.errorCode ?? 'unknown'}${result.error === undefined ? '' : `: ${result.error}`})`;
      return {
        consumer,
        result: 'failed',
        ...ids,
        errorCode: 'KR_CONSUMER_WEBHOOK_FAILED',
        error,
        nextAction: nextActionFor(consumer, ids.keyIds, 'KR_CONSUMER_WEBHOOK_FAILED'),
      };
    });
  }
}

/** The sinks of a key's `webhook` consumers, each once. */
function webhookConsumerSinks(key: KeyPolicy): string[] {
  return [
    ...new Set(
      (key.consumers ?? []).flatMap((consumer) => (consumer.kind === 'webhook' ? [consumer.sink] : [])),
    ),
  ];
}

/** A run's outcome as a stored value, with how soon its consumers need it (undefined: only notify.onSuccess hears of it). */
function storedValue(
  key: KeyPolicy,
  outcome: KeyOutcome,
  stage: NoticeStage,
): (Omit<StoredValue, 'urgency'> & { urgency: StoredValue['urgency'] | undefined }) | undefined {
  if (
    outcome.rotatedAt === undefined ||
    outcome.rotationId === undefined ||
    (outcome.result !== 'rotated' && outcome.result !== 'recovered')
  )
    return undefined;
  const rotatedAtMs = Date.parse(outcome.rotatedAt);
  return {
    key,
    rotationId: outcome.rotationId,
    storedAtMs: rotatedAtMs + (outcome.exposureMs ?? 0),
    reason: outcome.reason ?? 'scheduled',
    urgency: refreshUrgency(key, outcome),
    notice: {
      keyId: key.id,
      organizationId: key.organizationId,
      rotationId: outcome.rotationId,
      rotatedAt: outcome.rotatedAt,
      destinations: outcome.versions ?? [],
      stage,
    },
  };
}
