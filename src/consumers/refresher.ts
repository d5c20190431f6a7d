// The consumers' refresh (invariant 12): after a rotation stored a value its consumers do not hold
// yet, webhooks hear of it at once, every ExternalSecret is asked to sync and waited for, then each
// workload restarts once, in order, within the cap (restart-queue.ts), and, when the value consumers
// held still works, within the restart window. One refresher serves a runtime (a run, or a daemon
// generation): its restart queue is what coalesces runs and leak reports that share a workload.
// Every failure is the consumer's own (audited, alerted with the command to run by hand); none
// changes, repeats or undoes a rotation.
import { randomUUID } from 'node:crypto';
import type { Notifier } from '../alerts/public/notify.ts';
import type { Alerter } from '../alerts/public/types.ts';
import type { AuditLog } from '../audit/public/events.ts';
import type { ConsumerSettings } from '../policy/public/consumers.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { asConsumerError, ConsumerError } from './errors.ts';
import { syncExternalSecret } from './kinds/external-secret.ts';
import { ExternalSecretApi } from './kinds/external-secret-api.ts';
import {
  destinationSecretOf,
  syncVaultStaticSecret,
  vaultStaticSecretRef,
} from './kinds/vault-static-secret.ts';
import {
  reloaderRestarted,
  reloaderWatch,
  targetSecretOf,
  type ReloaderWatch,
  type WatchedSecret,
} from './kinds/reloader.ts';
import { markDeferred, recordOwed, recordRestarted, restartWorkload } from './kinds/workload.ts';
import { WORKLOAD_KINDS, workloadRef } from './kinds/workloads.ts';
import { findOwed, type KeyRecords } from './pick-up.ts';
import { Limit } from './limit.ts';
import { Delivery } from './delivery.ts';
import type { KubeClient } from './kubernetes/client.ts';
import type { OwedRestart } from './markers.ts';
import { planDelivery, policyOrder, type DeliveryPlan, type RestartTarget, type SyncTarget } from './plan.ts';
import { consumerKey, consumerName, isVaultStaticSecret, isWorkload, type WorkloadConsumer } from './refs.ts';
import {
  alertFailures,
  auditOutcomes,
  consumerFields,
  failedOutcome,
  keyIdsOf,
  observeAllRefreshed,
  reportOf,
  rotationIdsOf,
} from './report.ts';
import { RestartQueue, type RestartJob } from './restart-queue.ts';
import { inConsumerSpan, inRefreshSpan } from './trace.ts';
import type {
  ConsumerObserver,
  ConsumerOutcome,
  ConsumerResult,
  DeliveryReport,
  StoredValue,
} from './types.ts';
import { waitForObject } from './wait.ts';
import { nextOpening, windowOpen } from './window.ts';

export interface RefresherOptions {
  settings: ConsumerSettings;
  /** Made on first use: a run whose keys list no Kubernetes consumer never loads a kubeconfig. Throws ConsumerError. */
  kubeClient: () => KubeClient;
  notifier: Notifier;
  alerter: Alerter;
  now?: () => Date;
  observer?: ConsumerObserver;
  /** Shutdown: waits end at once (reported as timeouts); restarts already patched stand. */
  signal?: AbortSignal;
}

/** ExternalSecrets synced at once, and workloads read at once when looking for owed restarts. */
const PARALLEL_REQUESTS = 8;

interface WorkloadResult {
  result: ConsumerResult;
  notifiedAtMs?: number;
  refreshedAtMs?: number;
  error?: ConsumerError;
  nextWindowAt?: string;
  restartedBy?: 'reloader';
  /** Rotations the workload was not restarted for: an ExternalSecret they need did not sync. */
  blocked?: BlockedRestart;
}

interface BlockedRestart {
  rotationIds: string[];
  error: ConsumerError;
}

/** A sync's outcome as a restart's prerequisite: what tells a restart its value is not in the Secret. */
class SyncSettled {
  readonly outcome: ConsumerOutcome;
  constructor(outcome: ConsumerOutcome) {
    this.outcome = outcome;
  }
}

export class ConsumerRefresher {
  readonly #options: RefresherOptions;
  readonly #now: () => Date;
  readonly #queue: RestartQueue<WorkloadResult>;
  /** Jobs some of whose rotations wait on a sync that failed (set before the slot, read holding it). */
  readonly #blocked = new WeakMap<RestartJob, BlockedRestart>();
  /** Workloads Reloader restarts for a Secret a delivery syncs (consumerKey → marks read before the syncs); the latest delivery's. */
  readonly #reloader = new Map<string, ReloaderWatch>();
  #client: KubeClient | undefined;

  constructor(options: RefresherOptions) {
    this.#options = options;
    this.#now = options.now ?? (() => new Date());
    this.#queue = new RestartQueue<WorkloadResult>(options.settings.maxConcurrentRestarts, {
      beforeSlot: (job) => this.#beforeSlot(job),
      withSlot: (job) => this.#restart(job),
    });
  }

  /** A delivery for one run: hand it each key's outcome as the key ends, then finish it. */
  begin(audit: AuditLog, keys: readonly KeyPolicy[]): Delivery {
    return new Delivery(this, audit, keys);
  }

  /**
   * Restarts recorded as owed on the workloads `keys` list that are due now: urgent ones a runner
   * left behind (it stopped before the restart), and, inside the restart window, those left for
   * it. Each entry counts only as owed.ts judges it (its key lists the workload, its rotation is
   * the one `records` says is the key's last, the pods did not roll since); the others are settled
   * and audited (pick-up.ts). Read failures are audited by the delivery that finds them later;
   * nothing here alerts on a read. Undefined when nothing was owed.
   */
  async pickUpOwed(
    keys: readonly KeyPolicy[],
    audit: AuditLog,
    records: KeyRecords,
  ): Promise<DeliveryReport | undefined> {
    if (!keys.some((key) => (key.consumers ?? []).some(isWorkload))) return undefined;
    let client: KubeClient;
    try {
      client = this.client();
    } catch {
      return undefined;
    }
    const nowMs = this.#now().getTime();
    const open = windowOpen(this.#options.settings.restartWindow, this.#now());
    const staleAfterMs = this.#options.settings.syncTimeoutMs + this.#options.settings.rolloutTimeoutMs;
    const due = (entry: OwedRestart): boolean =>
      (entry.urgent || open) &&
      (entry.deferred === true || nowMs - Date.parse(entry.storedAt) > staleAfterMs);
    const found = await findOwed(client, {
      keys,
      records,
      nowMs,
      due,
      audit,
      signal: this.#options.signal,
      parallel: PARALLEL_REQUESTS,
    });
    if (found.length === 0) return undefined;
    const byId = new Map(keys.map((key) => [key.id, key]));
    const values = new Map<string, StoredValue>();
    const only = new Map<string, Set<string>>();
    for (const { workload, owed } of found) {
      for (const entry of owed) {
        const key = byId.get(entry.keyId);
        if (key === undefined) continue;
        const set = only.get(consumerKey(workload)) ?? new Set<string>();
        set.add(entry.rotationId);
        only.set(consumerKey(workload), set);
        if (!values.has(entry.rotationId)) values.set(entry.rotationId, ownedValue(key, entry));
      }
    }
    const deliveryId = randomUUID();
    const log = audit;
    log.emit('consumers.owed', {
      deliveryId,
      owed: found.flatMap(({ workload, owed }) =>
        owed.map((entry) => ({
          consumer: consumerName(workload),
          rotationId: entry.rotationId,
          keyId: entry.keyId,
          urgent: entry.urgent,
          deferred: entry.deferred === true,
          storedAt: entry.storedAt,
        })),
      ),
    });
    if (values.size === 0) return undefined;
    const list = [...values.values()];
    const what = {
      source: 'owed' as const,
      deliveryId,
      keyIds: [...new Set(list.map((value) => value.key.id))],
      rotationIds: list.map((value) => value.rotationId),
    };
    return inRefreshSpan(what, async () => {
      const outcomes = await this.deliverToKubernetes(
        planDelivery(list, policyOrder(keys), only),
        log,
        deliveryId,
        { recordOwed: false },
      );
      return this.finishDelivery(log, deliveryId, list, outcomes, keys, this.#now().getTime());
    });
  }

  /** The Kubernetes client, made on first use. Throws ConsumerError KR_CONSUMER_NO_CLIENT. */
  client(): KubeClient {
    this.#client ??= this.#options.kubeClient();
    return this.#client;
  }

  get notifier(): Notifier {
    return this.#options.notifier;
  }

  get now(): () => Date {
    return this.#now;
  }

  /** Syncs then restarts, per the plan; every consumer of the plan gets exactly one outcome. */
  async deliverToKubernetes(
    plan: DeliveryPlan,
    audit: AuditLog,
    deliveryId: string,
    options: { recordOwed: boolean },
  ): Promise<ConsumerOutcome[]> {
    let client: KubeClient;
    try {
      client = this.client();
    } catch (error) {
      const failure = asConsumerError(error);
      return [...plan.syncs, ...plan.restarts].map((target) =>
        failedOutcome(target.consumer, target.values, failure),
      );
    }
    const log = audit;
    const notified = (target: SyncTarget | RestartTarget) => (atMs: number) => {
      log.emit('consumer.notified', {
        deliveryId,
        ...consumerFields(target.consumer),
        keyIds: keyIdsOf(target.values),
        rotationIds: rotationIdsOf(target.values),
        msToNotified: Math.max(0, Math.round(atMs - latestStore(target.values))),
      });
    };
    // 1. Each workload records what it is owed before anything else (a runner that stops leaves it).
    const owedWrites = new Map<string, Promise<ConsumerError | undefined>>();
    if (options.recordOwed) {
      for (const target of plan.restarts) {
        const owed: OwedRestart[] = target.values.map((value) => ({
          rotationId: value.rotationId,
          keyId: value.key.id,
          urgent: value.urgency === 'now',
          storedAt: new Date(value.storedAtMs).toISOString(),
        }));
        owedWrites.set(
          consumerKey(target.consumer),
          recordOwed(
            client,
            workloadRef(target.consumer.kind, target.consumer.namespace, target.consumer.name),
            owed,
            this.#options.signal,
          ).then(() => undefined, asConsumerError),
        );
      }
    }
    // 2. Every ExternalSecret syncs at once (a few requests at a time), in the version of
    // external-secrets.io the cluster serves (one discovery per delivery). Before the first ask,
    // the workloads Stakater Reloader restarts for their Secrets are found, with what Reloader last
    // wrote on them: a change from there is Reloader's restart for this sync (reloader.ts).
    const syncs = new Map<string, Promise<ConsumerOutcome>>();
    const syncSlots = new Limit(PARALLEL_REQUESTS);
    const externalSecrets = new ExternalSecretApi(client);
    await this.#findReloaderWatches(client, externalSecrets, plan);
    for (const target of plan.syncs)
      syncs.set(
        consumerKey(target.consumer),
        syncSlots.run(() => this.#sync(client, externalSecrets, target, notified(target))),
      );
    // 3. Each workload restarts once its syncs are done, in order, within the cap.
    const restarts = plan.restarts.map(async (target): Promise<ConsumerOutcome> => {
      const owedWrite = owedWrites.get(consumerKey(target.consumer)) ?? Promise.resolve(undefined);
      // A sync that failed blocks the restart for its rotations (#beforeSlot): the pods would start on the old value.
      const prerequisites = [
        owedWrite,
        ...target.syncs.map(
          (key) => syncs.get(key)?.then((outcome) => new SyncSettled(outcome)) ?? Promise.resolve(),
        ),
      ];
      const job = this.#queue.request({
        workload: target.consumer,
        rotationIds: rotationIdsOf(target.values),
        urgent: target.urgent,
        prerequisites,
        onNotified: notified(target),
      });
      const [owedError, result] = await Promise.all([owedWrite, job]);
      if (owedError !== undefined) return failedOutcome(target.consumer, target.values, owedError);
      return workloadOutcome(target, result);
    });
    return [...(await Promise.all(syncs.values())), ...(await Promise.all(restarts))];
  }

  /**
   * For each workload to restart after syncs: whether Reloader restarts it when one of their
   * Secrets changes, and its marks now. A read that fails leaves the workload to keyroll's own
   * restart (the restart reads it again and fails there if it must).
   */
  async #findReloaderWatches(client: KubeClient, api: ExternalSecretApi, plan: DeliveryPlan): Promise<void> {
    const targets = plan.restarts.filter((target) => target.syncs.length > 0);
    if (targets.length === 0) return;
    const slots = new Limit(PARALLEL_REQUESTS);
    const secrets = new Map<string, Promise<WatchedSecret | undefined>>();
    for (const sync of plan.syncs) {
      const { namespace, name } = sync.consumer;
      const read = isVaultStaticSecret(sync.consumer)
        ? async () =>
            destinationSecretOf(await client.get(vaultStaticSecretRef(namespace, name), this.#options.signal))
        : async () =>
            targetSecretOf(
              await client.get(await api.ref(namespace, name, this.#options.signal), this.#options.signal),
            );
      secrets.set(
        consumerKey(sync.consumer),
        slots.run(read).catch(() => undefined),
      );
    }
    await Promise.all(
      targets.map(async (target) => {
        const key = consumerKey(target.consumer);
        const read = await Promise.all(
          target.syncs.map((sync) => secrets.get(sync) ?? Promise.resolve(undefined)),
        );
        const watched = read.filter((secret): secret is WatchedSecret => secret !== undefined);
        if (watched.length === 0) return;
        const { kind, namespace, name } = target.consumer;
        const workload = await slots
          .run(() => client.get(workloadRef(kind, namespace, name), this.#options.signal))
          .catch(() => undefined);
        const watch = workload === undefined ? undefined : reloaderWatch(workload, watched);
        if (watch === undefined) this.#reloader.delete(key);
        else this.#reloader.set(key, watch);
      }),
    );
  }

  /** Audits each outcome, feeds the metrics, alerts once for the failures, and says how it went. */
  async finishDelivery(
    audit: AuditLog,
    deliveryId: string,
    values: readonly StoredValue[],
    outcomes: ConsumerOutcome[],
    keys: readonly KeyPolicy[],
    startedAtMs: number,
  ): Promise<DeliveryReport> {
    const report = reportOf(deliveryId, outcomes);
    const stores = new Map(values.map((value) => [value.rotationId, value.storedAtMs]));
    auditOutcomes(
      audit.child({}),
      deliveryId,
      outcomes,
      (outcome) => Math.max(...outcome.rotationIds.map((id) => stores.get(id) ?? 0)),
      this.#options.observer,
    );
    observeAllRefreshed(values, outcomes, this.#options.observer);
    await alertFailures(this.#options.alerter, report, keys);
    audit.emit('consumers.finished', {
      deliveryId,
      refreshed: report.refreshed,
      failed: report.failed,
      deferred: report.deferred,
      skipped: report.skipped,
      durationMs: Math.max(0, this.#now().getTime() - startedAtMs),
    });
    return report;
  }

  #sync(
    client: KubeClient,
    api: ExternalSecretApi,
    target: SyncTarget,
    onNotified: (atMs: number) => void,
  ): Promise<ConsumerOutcome> {
    return inConsumerSpan(
      isVaultStaticSecret(target.consumer) ? 'vaultStaticSecret sync' : 'externalSecret sync',
      target.consumer,
      rotationIdsOf(target.values),
      () => this.#syncOnce(client, api, target, onNotified),
      (outcome) => outcome,
    );
  }

  async #syncOnce(
    client: KubeClient,
    api: ExternalSecretApi,
    target: SyncTarget,
    onNotified: (atMs: number) => void,
  ): Promise<ConsumerOutcome> {
    const { consumer } = target;
    try {
      if (isVaultStaticSecret(consumer)) {
        const synced = await syncVaultStaticSecret(
          client,
          vaultStaticSecretRef(consumer.namespace, consumer.name),
          {
            timeoutMs: this.#options.settings.syncTimeoutMs,
            now: () => this.#now().getTime(),
            onNotified,
            ...(this.#options.signal ? { signal: this.#options.signal } : {}),
          },
        );
        return {
          consumer,
          result: 'refreshed',
          keyIds: keyIdsOf(target.values),
          rotationIds: rotationIdsOf(target.values),
          notifiedAtMs: synced.notifiedAtMs,
          refreshedAtMs: this.#now().getTime(),
        };
      }
      const ref = await api.ref(consumer.namespace, consumer.name, this.#options.signal);
      const result = await syncExternalSecret(client, ref, target.storedAtMs, {
        timeoutMs: this.#options.settings.syncTimeoutMs,
        now: () => this.#now().getTime(),
        onNotified,
        ...(this.#options.signal ? { signal: this.#options.signal } : {}),
      });
      // Refreshed when keyroll saw it (the controller's clock says less than it claims).
      return {
        consumer,
        result: 'refreshed',
        keyIds: keyIdsOf(target.values),
        rotationIds: rotationIdsOf(target.values),
        notifiedAtMs: result.notifiedAtMs,
        refreshedAtMs: this.#now().getTime(),
      };
    } catch (error) {
      return failedOutcome(consumer, target.values, asConsumerError(error));
    }
  }

  /**
   * Before a slot (every prerequisite settled): no restart for rotations whose ExternalSecret did
   * not sync (their owed entries stay on the workload for the next run or sweep); then a job whose
   * every value still works waits for the restart window (recorded on the workload).
   */
  async #beforeSlot(job: RestartJob): Promise<WorkloadResult | undefined> {
    const blocked = await blockedRotations(job);
    if (blocked !== undefined) {
      this.#blocked.set(job, blocked);
      if (job.rotationIds.every((id) => blocked.rotationIds.includes(id)))
        return { result: 'failed', error: blocked.error, blocked };
    }
    const { restartWindow } = this.#options.settings;
    // Reloader restarted it when its Secret changed, window or not: keyroll only proves it.
    if (job.urgent || this.#reloader.has(consumerKey(job.workload)) || windowOpen(restartWindow, this.#now()))
      return undefined;
    const workload = job.workload as WorkloadConsumer;
    try {
      await markDeferred(
        this.client(),
        workloadRef(workload.kind, workload.namespace, workload.name),
        unblocked(job, blocked),
        this.#options.signal,
      );
    } catch (error) {
      return {
        result: 'failed',
        error: asConsumerError(error),
        ...(blocked === undefined ? {} : { blocked }),
      };
    }
    const next = nextOpening(restartWindow, this.#now());
    return {
      result: 'deferred',
      ...(next === undefined ? {} : { nextWindowAt: next.toISOString() }),
      ...(blocked === undefined ? {} : { blocked }),
    };
  }

  /** Holding a slot: the restart (unless another runner did it for these rotations), then its rollout. */
  #restart(job: RestartJob): Promise<WorkloadResult> {
    return inConsumerSpan(
      'workload restart',
      job.workload,
      job.rotationIds,
      () => this.#restartOnce(job),
      (answer) => ({ result: answer.result, errorCode: answer.error?.code }),
    );
  }

  async #restartOnce(job: RestartJob): Promise<WorkloadResult> {
    const workload = job.workload as WorkloadConsumer;
    const ref = workloadRef(workload.kind, workload.namespace, workload.name);
    const client = this.client();
    const blocked = this.#blocked.get(job);
    const answered = (result: WorkloadResult): WorkloadResult =>
      blocked === undefined ? result : { ...result, blocked };
    const watch = this.#reloader.get(consumerKey(workload));
    if (watch !== undefined) {
      this.#reloader.delete(consumerKey(workload));
      const byReloader = await this.#awaitReloader(job, ref, watch, unblocked(job, blocked));
      if (byReloader !== undefined) return answered(byReloader);
    }
    let notifiedAtMs: number | undefined;
    try {
      // restarted-for names only the rotations whose syncs were proved (status reads it as "runs on that value").
      const answer = await restartWorkload(client, ref, unblocked(job, blocked), {
        now: () => this.#now().getTime(),
        ...(this.#options.signal ? { signal: this.#options.signal } : {}),
      });
      if (!answer.restarted) return answered({ result: 'skipped' });
      const at = this.#now().getTime();
      notifiedAtMs = at;
      for (const listener of job.notified) listener(at);
      await waitForObject(client, ref, (object) => WORKLOAD_KINDS[workload.kind].rollout(object), {
        timeoutMs: this.#options.settings.rolloutTimeoutMs,
        what: `the rollout of ${consumerName(workload)}`,
        ...(this.#options.signal ? { signal: this.#options.signal } : {}),
      });
      return answered({ result: 'refreshed', notifiedAtMs, refreshedAtMs: this.#now().getTime() });
    } catch (error) {
      return answered({
        result: 'failed',
        error: asConsumerError(error),
        ...(notifiedAtMs === undefined ? {} : { notifiedAtMs }),
      });
    }
  }

  /**
   * A workload Reloader restarts (kinds/reloader.ts): its syncs are done, so Reloader has patched
   * its pod template or is about to. keyroll waits up to reloaderTimeout for that change, then for
   * the rollout of the template carrying it, records restarted-for (no second restart, by this
   * runner or another) and reports it restarted by Reloader. Undefined when Reloader made no change
   * in time: keyroll restarts the workload itself (invariant 12: the pods must not stay on the old
   * value because Reloader is down or configured otherwise).
   */
  async #awaitReloader(
    job: RestartJob,
    ref: ReturnType<typeof workloadRef>,
    watch: ReloaderWatch,
    rotationIds: readonly string[],
  ): Promise<WorkloadResult | undefined> {
    const workload = job.workload as WorkloadConsumer;
    const client = this.client();
    const signal = this.#options.signal ? { signal: this.#options.signal } : {};
    let notifiedAtMs: number | undefined;
    try {
      try {
        await waitForObject(
          client,
          ref,
          (object) =>
            reloaderRestarted(object, watch)
              ? { done: true }
              : { waiting: `Reloader has not changed the pod template for ${watch.secrets.join(', ')}` },
          {
            timeoutMs: this.#options.settings.reloaderTimeoutMs,
            what: `Reloader's restart of ${consumerName(workload)}`,
            ...signal,
          },
        );
      } catch (error) {
        if (
          error instanceof ConsumerError &&
          error.code === 'KR_CONSUMER_TIMEOUT' &&
          this.#options.signal?.aborted !== true
        )
          return undefined;
        throw error;
      }
      notifiedAtMs = this.#now().getTime();
      for (const listener of job.notified) listener(notifiedAtMs);
      // The rollout of the latest generation: Reloader's patch, and any later one.
      await waitForObject(client, ref, (object) => WORKLOAD_KINDS[workload.kind].rollout(object), {
        timeoutMs: this.#options.settings.rolloutTimeoutMs,
        what: `the rollout of ${consumerName(workload)} (restarted by Reloader)`,
        ...signal,
      });
      const recorded =
        rotationIds.length === 0
          ? false
          : await recordRestarted(client, ref, rotationIds, this.#options.signal);
      if (!recorded && rotationIds.length > 0) return { result: 'skipped' };
      return {
        result: 'refreshed',
        notifiedAtMs,
        refreshedAtMs: this.#now().getTime(),
        restartedBy: 'reloader',
      };
    } catch (error) {
      return {
        result: 'failed',
        error: asConsumerError(error),
        ...(notifiedAtMs === undefined ? {} : { notifiedAtMs }),
      };
    }
  }
}

/** A value recorded as owed on a workload, as a pick-up delivers it again. */
function ownedValue(key: KeyPolicy, entry: OwedRestart): StoredValue {
  const storedAtMs = Date.parse(entry.storedAt);
  return {
    key,
    rotationId: entry.rotationId,
    storedAtMs,
    reason: 'scheduled',
    urgency: entry.urgent ? 'now' : 'window',
    notice: {
      keyId: key.id,
      organizationId: key.organizationId,
      rotationId: entry.rotationId,
      rotatedAt: entry.storedAt,
      destinations: [],
      stage: 'finished',
    },
  };
}

function latestStore(values: readonly StoredValue[]): number {
  return Math.max(...values.map((value) => value.storedAtMs));
}

/** The rotations of `job` an ExternalSecret sync that failed blocks (its prerequisites have settled), with why. */
async function blockedRotations(job: RestartJob): Promise<BlockedRestart | undefined> {
  const settled = await Promise.all(
    job.prerequisites.map((prerequisite) => prerequisite.catch(() => undefined)),
  );
  const failed = settled
    .filter(
      (value): value is SyncSettled => value instanceof SyncSettled && value.outcome.result === 'failed',
    )
    .map((value) => value.outcome);
  const rotationIds = job.rotationIds.filter((id) =>
    failed.some((outcome) => outcome.rotationIds.includes(id)),
  );
  if (rotationIds.length === 0) return undefined;
  const which = [
    ...new Set(
      failed.map((outcome) => `${consumerName(outcome.consumer)} (${outcome.errorCode ?? 'failed'})`),
    ),
  ].join(', ');
  return {
    rotationIds,
    error: new ConsumerError(
      'KR_CONSUMER_SYNC_BLOCKED',
      `not restarted: ${which} did not sync the new value, so its pods would start on the old one`,
    ),
  };
}

function unblocked(job: RestartJob, blocked: BlockedRestart | undefined): string[] {
  return blocked === undefined
    ? job.rotationIds
    : job.rotationIds.filter((id) => !blocked.rotationIds.includes(id));
}

function workloadOutcome(target: RestartTarget, result: WorkloadResult): ConsumerOutcome {
  const keyIds = keyIdsOf(target.values);
  const base = { consumer: target.consumer, keyIds, rotationIds: rotationIdsOf(target.values) };
  // A value it needs never reached its Secret: not refreshed, whatever the restart did for other keys.
  if (
    result.blocked !== undefined &&
    base.rotationIds.some((id) => result.blocked?.rotationIds.includes(id) === true)
  ) {
    return failedOutcome(target.consumer, target.values, result.blocked.error, result.notifiedAtMs);
  }
  switch (result.result) {
    case 'failed':
      return failedOutcome(
        target.consumer,
        target.values,
        result.error ?? new ConsumerError('KR_CONSUMER_UNREACHABLE', 'the restart failed'),
        result.notifiedAtMs,
      );
    case 'deferred':
      return {
        ...base,
        result: 'deferred',
        nextAction: `restarts in the first run or sweep inside the restart window${result.nextWindowAt === undefined ? '' : ` (it opens at ${result.nextWindowAt})`}; or now by hand`,
      };
    case 'skipped':
      return { ...base, result: 'skipped' };
    case 'refreshed':
      return {
        ...base,
        result: 'refreshed',
        ...(result.restartedBy === undefined ? {} : { restartedBy: result.restartedBy }),
        ...(result.notifiedAtMs === undefined ? {} : { notifiedAtMs: result.notifiedAtMs }),
        ...(result.refreshedAtMs === undefined ? {} : { refreshedAtMs: result.refreshedAtMs }),
      };
  }
}
