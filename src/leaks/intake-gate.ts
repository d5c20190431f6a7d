// What a verified scanner delivery that asks for work passes before the work starts, the same for
// every source: a place in the bounded queue (else 503 intake-busy, nothing spent), the durable
// replay record (what the signature covers, claimed once: else 409), and one job per scanner
// alert and action within the window (a second, different delivery for the same alert is audited
// as ignored, not worked on again). So however often a captured delivery is replayed, and however
// many deliveries one alert gets, GitHub is fetched and a person alerted at most once per alert
// and action per window, and never more than `capacity` jobs wait.
//
// The GitHub reconcile (github/reconcile.ts) finds alerts by listing them and passes the same
// gate: one job per alert at a time whichever way it came (a delivery for an alert the reconcile
// is handling is a duplicate, and the reconcile skips an alert a delivery's job is handling), and
// an alert handled within the window is not handled again by the reconcile.
import type { ReplayRecord } from '../inbound/public/replay-claim.ts';
import { claimOrRefuse } from '../inbound/public/replay-claim.ts';
import { DEFAULT_INTAKE_QUEUE, IntakeQueue, type QueuePlace } from './intake-queue.ts';
import { OncePerWindow } from './once-per-window.ts';
import type { IntakeRefusal } from './webhook-answer.ts';

export interface IntakeLimits {
  /** One job per alert and action within this window; also how long an ignored delivery is audited once. */
  alertWindowMs: number;
  /** Delivery jobs running at once. */
  concurrency: number;
  /** Reconcile jobs running at once, on runners of their own (intake-queue.ts). */
  reconcileConcurrency: number;
  /** Jobs running or waiting, at most. */
  queueCapacity: number;
  /** Alerts (and ignored deliveries) remembered for the window, at most. */
  remembered: number;
}

export const DEFAULT_INTAKE_LIMITS: IntakeLimits = {
  alertWindowMs: 3_600_000,
  concurrency: DEFAULT_INTAKE_QUEUE.concurrency,
  reconcileConcurrency: DEFAULT_INTAKE_QUEUE.reconcileConcurrency,
  queueCapacity: DEFAULT_INTAKE_QUEUE.capacity,
  remembered: 10_000,
};

export interface DeliveryToAdmit {
  replay: ReplayRecord | undefined;
  /** The replay record's id: what the sender's signature covers. */
  id: string;
  /** Unix seconds until the record keeps `id`. */
  expiresAt: number;
  /** The sender's signed timestamp, where it signs one. */
  signedAt?: number;
  /** The scanner alert and action the job is about, e.g. `octo/app#42:created`. */
  alert: string;
  /** The alert alone (`octo/app#42`), where a reconcile may find it too. */
  ref?: string;
  now: Date;
}

export type Admission =
  | { kind: 'refused'; why: IntakeRefusal }
  | { kind: 'duplicate-alert' }
  | { kind: 'admitted'; place: QueuePlace };

/** Why the reconcile leaves an open alert alone this time. */
export type ReconcileSkip = 'in-flight' | 'handled-within-window' | 'intake-busy';
export type ReconcileAdmission =
  { kind: 'skipped'; why: ReconcileSkip } | { kind: 'admitted'; place: QueuePlace };

export class IntakeGate {
  readonly #queue: IntakeQueue;
  readonly #alerts: OncePerWindow;
  readonly #ignored: OncePerWindow;
  /** Alerts (`ref`) whose job, from either way in, is queued or running. */
  readonly #jobs = new Set<string>();
  /** Alerts (`ref`) that got a job within the window, from either way in. */
  readonly #handled: OncePerWindow;

  constructor(background: (work: Promise<void>) => void, limits: Partial<IntakeLimits> = {}) {
    const { alertWindowMs, concurrency, queueCapacity, remembered } = { ...DEFAULT_INTAKE_LIMITS, ...limits };
    // Half the deliveries' runners unless set: a gate given fewer delivery runners gives the reconcile fewer too.
    const reconcileConcurrency = limits.reconcileConcurrency ?? Math.max(1, Math.floor(concurrency / 2));
    this.#queue = new IntakeQueue({ concurrency, reconcileConcurrency, capacity: queueCapacity, background });
    this.#alerts = new OncePerWindow(alertWindowMs, remembered);
    this.#ignored = new OncePerWindow(alertWindowMs, remembered);
    this.#handled = new OncePerWindow(alertWindowMs, remembered);
  }

  /** Alerts a reconcile handles at once, on runners of their own: the deliveries' runners stay theirs. */
  get reconcileConcurrency(): number {
    return this.#queue.reconcileConcurrency;
  }

  /** Jobs running, waiting or about to be queued. */
  get queued(): number {
    return this.#queue.size;
  }

  async admit(delivery: DeliveryToAdmit): Promise<Admission> {
    const place = this.#queue.reserve();
    if (place === undefined) return { kind: 'refused', why: 'intake-busy' };
    // Taken before the claim's await: two deliveries for one alert at once are one job, and so
    // are a delivery and a reconcile (the job running fetches the alert's state itself).
    const { ref } = delivery;
    const busy = ref !== undefined && this.#jobs.has(ref);
    const first = !busy && this.#alerts.first(delivery.alert, delivery.now.getTime());
    if (first && ref !== undefined) this.#jobs.add(ref);
    const nowSeconds = Math.floor(delivery.now.getTime() / 1000);
    const unclaimed = await claimOrRefuse(
      delivery.replay,
      delivery.id,
      delivery.expiresAt,
      nowSeconds,
      delivery.signedAt,
    );
    if (unclaimed !== undefined || !first) {
      place.release();
      if (unclaimed !== undefined && first) {
        this.#alerts.forget(delivery.alert);
        if (ref !== undefined) this.#jobs.delete(ref);
      }
      return unclaimed === undefined ? { kind: 'duplicate-alert' } : { kind: 'refused', why: unclaimed.why };
    }
    if (ref === undefined) return { kind: 'admitted', place };
    this.#handled.first(ref, delivery.now.getTime());
    return { kind: 'admitted', place: this.#tracked(ref, place) };
  }

  /**
   * The reconcile's way in for an open alert it listed: skipped while a job for it runs (either
   * way in), when one was admitted within the window, or when the queue is full (the next
   * reconcile tries again; a full queue is for deliveries first).
   */
  admitReconciled(ref: string, now: Date): ReconcileAdmission {
    if (this.#jobs.has(ref)) return { kind: 'skipped', why: 'in-flight' };
    if (!this.#handled.first(ref, now.getTime())) return { kind: 'skipped', why: 'handled-within-window' };
    const place = this.#queue.reserve('reconcile');
    if (place === undefined) {
      this.#handled.forget(ref);
      return { kind: 'skipped', why: 'intake-busy' };
    }
    this.#jobs.add(ref);
    return { kind: 'admitted', place: this.#tracked(ref, place) };
  }

  /** The place, with `ref` forgotten from the running jobs when its job ends or it is given back. */
  #tracked(ref: string, place: QueuePlace): QueuePlace {
    return {
      run: (job) => {
        place.run(async () => {
          try {
            await job();
          } finally {
            this.#jobs.delete(ref);
          }
        });
      },
      release: () => {
        this.#jobs.delete(ref);
        place.release();
      },
    };
  }

  /**
   * True the first time an ignored delivery (`id`: what its signature covers) comes within the
   * window: it is audited then, and answered alike but not audited again when replayed (ignored
   * deliveries are never recorded, so nothing else stops their replays).
   */
  firstIgnored(id: string, now: Date): boolean {
    return this.#ignored.first(id, now.getTime());
  }
}
