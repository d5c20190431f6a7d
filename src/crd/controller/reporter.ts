// The RotatedKey controller's reporting side (issue 31): the daemon tells it what happens (a new
// generation of keys and refusals, each key's outcome, the consumers' deliveries, leadership, each
// change the RotatedKey reflector sees) and it keeps each object's status and Events in step.
// - Leader only: a replica that does not hold the Lease sends nothing at all; it keeps its facts
//   current, and on becoming leader writes every status once where it differs.
// - One write per change: the status is a pure function of the facts (key-status.ts); writeStatus
//   sends nothing when it equals the stored one, and the writes of one object run one at a time,
//   coalesced (changes that arrive while a write is in flight make one more write, not one each).
//   A rotation makes at most two writes: its outcome, and its consumers' delivery.
// - Rotate-now (rotate-now.ts): served once per value, settled in the status, annotation removed.
// Failures are audited (crd.status.failed) and never thrown at the daemon: the next change retries.
import type { AuditLog } from '../../audit/public/events.ts';
import type { KeyState } from '../../backends/public/types.ts';
import { Limit } from '../../consumers/public/limit.ts';
import { catalogueCode, errorCode, errorMessage } from '../../errors.ts';
import type { KeyPolicy } from '../../policy/public/schema.ts';
import type { KeyOutcome } from '../../rotation/public/types.ts';
import type { RotateNowStatus } from '../kinds/rotated-key-status.ts';
import { conditionTime } from '../status/conditions.ts';
import { recordEvent } from '../status/events.ts';
import { writeStatus, type JsonObject } from '../status/status-writer.ts';
import type { ObjectRequests } from '../watch/kube-client.ts';
import type { WatchChange } from '../watch/reflector.ts';
import type { WatchedObject, WatchedResource } from '../watch/resource.ts';
import type { AnnotationRequests } from './annotation-client.ts';
import {
  factsAfterConsumers,
  factsAfterOutcome,
  factsFromState,
  factsUnderPolicy,
  type ConsumersReport,
  type KeyFacts,
} from './key-facts.ts';
import { keyStatus, type StatusRefusal } from './key-status.ts';
import { objectRef, splitKey } from './object-key.ts';
import { consumersEvent, outcomeEvent, type EventFacts } from './outcome-events.ts';
import { RotateNowServer } from './rotate-now-server.ts';
import type { RotateNowPort } from './rotate-now.ts';

/** A refusal as the daemon's generation reports it (src/crd/policy's Refusal). */
export interface GenerationRefusal extends StatusRefusal {
  object: { kind: string; namespace?: string; name: string };
}

export interface StatusReporterOptions {
  requests: ObjectRequests;
  /** The rotatedkeys resource (every namespace, or the one keyroll watches). */
  resource: WatchedResource;
  /** The RotatedKeys as the daemon's reflector holds them, by `namespace/name`. */
  objects: { get(key: string): WatchedObject | undefined };
  /** The policy entry of a key of the current generation. */
  keyPolicy: (keyId: string) => KeyPolicy | undefined;
  /** Reads a key's record at its primary destination (readTrustedState); no write. */
  readTrustedState: (keyId: string, signal: AbortSignal) => Promise<KeyState>;
  audit: AuditLog;
  /** Rotate-now: the daemon's port to the launcher, and the annotation's remover. Absent: not served. */
  rotateNow?: { port: RotateNowPort; annotations: AnnotationRequests };
  now?: () => Date;
  /** Objects written at once (a new leader writes every object; its key stores and the API server share the load). Default 8. */
  concurrency?: number;
  /** Events posted at once. Default EVENT_CONCURRENCY. */
  eventConcurrency?: number;
}

/** Events posted at once by default: half the status writes' share; an Event is the lesser news. */
const EVENT_CONCURRENCY = 4;

export interface ReporterCounts {
  /** Status patches the API server took. */
  writes: number;
  /** Reconciles that found the stored status right, and sent nothing. */
  unchanged: number;
  /** Patches refused with 409 and computed again. */
  conflicts: number;
  events: number;
}

const ROTATED_KEY = { apiVersion: 'keyroll.io/v1alpha1', kind: 'RotatedKey' } as const;

export class StatusReporter {
  readonly #options: StatusReporterOptions;
  readonly #now: () => Date;
  #term: AbortController | undefined;
  /** RotatedKey `namespace/name` → the key id its entry rotates (the current generation). */
  #keys = new Map<string, string>();
  #refusals = new Map<string, StatusRefusal>();
  readonly #facts = new Map<string, KeyFacts>();
  /** Outcomes applied already (a rotate-now's comes both from the daemon and from its port). */
  readonly #applied = new WeakSet<KeyOutcome>();
  /** Keys whose record must be read again before their next write (a failure moved its streak). */
  readonly #stale = new Set<string>();
  readonly #dirty = new Set<string>();
  readonly #running = new Map<string, Promise<void>>();
  /** A settled rotate-now waiting for its status write, by object. */
  readonly #settles = new Map<string, RotateNowStatus>();
  /** Our last write per object, until the reflector shows it (its copy is older until then). */
  readonly #written = new Map<string, { from: string | undefined; object: WatchedObject }>();
  readonly #pending = new Set<Promise<unknown>>();
  readonly #rotateNow: RotateNowServer | undefined;
  readonly #counts: ReporterCounts = { writes: 0, unchanged: 0, conflicts: 0, events: 0 };
  /** The `concurrency` objects written at once. */
  readonly #writes: Limit;
  /**
   * Events posted at once. Apart from the status writes, so an Event never holds a status up; but
   * bounded, so a thousand rotations ending together do not open a thousand requests to the API
   * server (the crd bench saw 2,300 unbounded POSTs answered at p99 1.9 s beside the writes).
   */
  readonly #events: Limit;

  constructor(options: StatusReporterOptions) {
    this.#options = options;
    this.#now = options.now ?? (() => new Date());
    this.#writes = new Limit(options.concurrency ?? 8);
    this.#events = new Limit(options.eventConcurrency ?? EVENT_CONCURRENCY);
    this.#rotateNow =
      options.rotateNow === undefined
        ? undefined
        : new RotateNowServer({
            ...options.rotateNow,
            resource: options.resource,
            objects: options.objects,
            audit: options.audit,
            now: this.#now,
            keyOf: (object) => this.#keys.get(object),
            refusalOf: (object) => this.#refusals.get(object),
            settle: (object, settled, outcome) => {
              this.#settle(object, settled, outcome);
            },
            event: (object, facts) => {
              this.#event(object, facts);
            },
            track: (work) => this.#track(work),
          });
  }

  get leading(): boolean {
    return this.#term !== undefined;
  }

  get counts(): Readonly<ReporterCounts> {
    return { ...this.#counts };
  }

  /** A new generation: which objects are rotated as which key, and which are refused. */
  onGeneration(keys: ReadonlyMap<string, string>, refusals: readonly GenerationRefusal[]): void {
    const before = this.#refusals;
    this.#keys = new Map(keys);
    this.#refusals = new Map();
    for (const refusal of refusals) {
      if (refusal.object.kind !== 'RotatedKey' || refusal.object.namespace === undefined) continue;
      const object = `${refusal.object.namespace}/${refusal.object.name}`;
      this.#refusals.set(object, { reason: refusal.reason, message: refusal.message });
      // A refusal is told once (its Event), then kept in the status until it is lifted.
      if (before.get(object)?.reason !== refusal.reason)
        this.#event(object, { type: 'Warning', reason: 'Refused', message: refusal.message });
    }
    const kept = new Set(this.#keys.values());
    for (const keyId of this.#facts.keys()) if (!kept.has(keyId)) this.#facts.delete(keyId);
    for (const object of [...this.#keys.keys(), ...this.#refusals.keys()]) this.#schedule(object);
    this.#rotateNow?.scanAll(this.#term?.signal, [...this.#keys.keys(), ...this.#refusals.keys()]);
  }

  /** One key's outcome from any run (schedule, sweep, trigger, rotate-now). */
  onKeyOutcome(keyId: string, outcome: KeyOutcome): void {
    if (this.#applied.has(outcome)) return;
    this.#applied.add(outcome);
    const key = this.#options.keyPolicy(keyId);
    const facts = this.#facts.get(keyId);
    if (key !== undefined && facts !== undefined)
      this.#facts.set(keyId, factsAfterOutcome(key, facts, outcome, this.#now()));
    // The record holds the streak's own count, backoff and quarantine: read it before the write.
    // So does a key not read yet, or being read: that read may predate this outcome's record.
    // And a drifted key a run found not due: the drift probe of that run may have found the stored
    // secret working again (put back by hand), which only the probe's record says.
    const probedAlive =
      facts?.driftedAt !== undefined && outcome.result === 'skipped' && outcome.detail === 'not-due';
    if (outcome.result === 'failed' || facts === undefined || probedAlive) this.#stale.add(keyId);
    const event = outcomeEvent(outcome);
    for (const object of this.#objectsOf(keyId)) {
      if (event !== undefined) this.#event(object, event);
      // A rotate-now in flight writes its settle with this outcome: one write, not two.
      if (!(this.#rotateNow?.inFlight(object) ?? false)) this.#schedule(object);
    }
  }

  /** The refresher's delivery to the consumers of `keyId` ended. */
  onConsumers(keyId: string, report: ConsumersReport): void {
    const facts = this.#facts.get(keyId);
    if (facts !== undefined) this.#facts.set(keyId, factsAfterConsumers(facts, report));
    const event = consumersEvent(report);
    for (const object of this.#objectsOf(keyId)) {
      if (event !== undefined) this.#event(object, event);
      this.#schedule(object);
    }
  }

  /** The Lease was taken (a new term: every status once, where it differs) or lost (stop). */
  onLeadership(leading: boolean): void {
    if (!leading) {
      this.#term?.abort();
      this.#term = undefined;
      return;
    }
    if (this.#term !== undefined) return;
    this.#term = new AbortController();
    for (const object of [...this.#keys.keys(), ...this.#refusals.keys()]) this.#schedule(object);
    this.#rotateNow?.scanAll(this.#term.signal, [...this.#keys.keys(), ...this.#refusals.keys()]);
  }

  /** A change of a RotatedKey the daemon's reflector saw (its onChange). */
  onObjectChange(change: WatchChange): void {
    if (change.type === 'deleted') {
      this.#written.delete(change.key);
      this.#settles.delete(change.key);
      return;
    }
    this.#rotateNow?.scan(this.#term?.signal, change.key);
  }

  /** Resolves once no write, Event or rotate-now is under way (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.#pending.size > 0) await Promise.allSettled([...this.#pending]);
  }

  #objectsOf(keyId: string): string[] {
    return [...this.#keys].filter(([, id]) => id === keyId).map(([object]) => object);
  }

  #settle(object: string, settled: RotateNowStatus, outcome: KeyOutcome | undefined): void {
    const keyId = this.#keys.get(object);
    // The daemon may not pass a rotate-now's outcome through onKeyOutcome: applied here, once.
    if (outcome !== undefined && keyId !== undefined) this.onKeyOutcome(keyId, outcome);
    this.#settles.set(object, settled);
    this.#schedule(object);
  }

  #track<T>(work: Promise<T>): Promise<T> {
    this.#pending.add(work);
    void work.finally(() => this.#pending.delete(work)).catch(() => undefined);
    return work;
  }

  /** Marks the object's status for a write; one writer per object drains the marks. */
  #schedule(object: string): void {
    if (this.#term === undefined) return;
    this.#dirty.add(object);
    if (this.#running.has(object)) return;
    const run = this.#drain(object).finally(() => this.#running.delete(object));
    this.#running.set(object, run);
    void this.#track(run);
  }

  async #drain(object: string): Promise<void> {
    while (this.#dirty.delete(object)) {
      const term = this.#term;
      if (term === undefined) return;
      // One tick first: the outcomes of one synchronous burst (a run's keys, a retried key) all
      // land in this write rather than the first alone making it and the rest one more.
      await Promise.resolve();
      try {
        await this.#writes.run(() => this.#writeOne(object, term.signal));
      } catch (error) {
        if (term.signal.aborted) return;
        this.#options.audit.emit('crd.status.failed', {
          object,
          what: 'status',
          errorCode: catalogueCode(error),
          error: errorMessage(error),
        });
      }
    }
  }

  async #writeOne(object: string, signal: AbortSignal): Promise<void> {
    const ref = objectRef(this.#options.resource, object);
    const keyId = this.#keys.get(object);
    const refusal = this.#refusals.get(object);
    // Neither rotated nor refused in this generation: nothing keyroll can say of it now.
    if (keyId === undefined && refusal === undefined) return;
    const facts = keyId === undefined ? undefined : await this.#currentFacts(keyId, signal);
    const settle = this.#settles.get(object);
    const result = await writeStatus({
      requests: this.#options.requests,
      ref,
      ...this.#current(object),
      signal,
      desired: (read) =>
        keyStatus({
          facts: refusal === undefined ? facts : undefined,
          refusal,
          generation: read.metadata?.generation ?? 0,
          stored: statusOf(read),
          rotateNow: settle,
          now: this.#now(),
        }),
    });
    if (result.outcome === 'written') {
      this.#counts.writes++;
      this.#counts.conflicts += result.attempts - 1;
      this.#written.set(object, {
        from: this.#options.objects.get(object)?.metadata?.resourceVersion,
        object: result.object,
      });
    } else if (result.outcome === 'unchanged') this.#counts.unchanged++;
    if (settle !== undefined && this.#settles.get(object) === settle) {
      this.#settles.delete(object);
      if (result.outcome !== 'gone') await this.#rotateNow?.removeAnnotation(object, settle.value, signal);
    }
  }

  /** The newest copy of the object we have: the reflector's, or our own last write it has not shown yet. */
  #current(object: string): { current?: WatchedObject } {
    const seen = this.#options.objects.get(object);
    const written = this.#written.get(object);
    if (written !== undefined && seen?.metadata?.resourceVersion === written.from)
      return { current: written.object };
    this.#written.delete(object);
    return seen === undefined ? {} : { current: seen };
  }

  async #currentFacts(keyId: string, signal: AbortSignal): Promise<KeyFacts | undefined> {
    const known = this.#facts.get(keyId);
    const key = this.#options.keyPolicy(keyId);
    if (key === undefined) return known;
    if (known !== undefined && !this.#stale.has(keyId)) return factsUnderPolicy(key, known);
    this.#stale.delete(keyId);
    try {
      const facts = factsFromState(key, await this.#options.readTrustedState(keyId, signal));
      // Consumers' state is not in the record: what the refresher reported stays.
      const merged =
        known?.consumers !== undefined && facts.consumers !== undefined
          ? { ...facts, consumers: known.consumers }
          : facts;
      this.#facts.set(keyId, merged);
      return merged;
    } catch (error) {
      if (signal.aborted) throw error;
      if (known !== undefined) return known;
      return { keyId, failedAttempts: 0, readError: { errorCode: errorCode(error) } };
    }
  }

  #event(object: string, facts: EventFacts): void {
    const term = this.#term;
    if (term === undefined) return;
    const [namespace, name] = splitKey(object);
    const uid = this.#options.objects.get(object)?.metadata?.uid;
    const time = this.#now();
    const work = this.#events
      .run(() =>
        recordEvent(
          this.#options.requests,
          { involved: { ...ROTATED_KEY, namespace, name, ...(uid === undefined ? {} : { uid }) }, ...facts },
          term.signal,
          time,
        ),
      )
      .then(
        () => {
          this.#counts.events++;
        },
        (error: unknown) => {
          if (term.signal.aborted) return;
          this.#options.audit.emit('crd.status.failed', {
            object,
            what: 'event',
            reason: facts.reason,
            at: conditionTime(time),
            errorCode: catalogueCode(error),
            error: errorMessage(error),
          });
        },
      );
    void this.#track(work);
  }
}

function statusOf(object: WatchedObject): JsonObject | undefined {
  const status = object.status;
  return typeof status === 'object' && status !== null && !Array.isArray(status)
    ? (status as JsonObject)
    : undefined;
}
