// The leak intake's background jobs (fetch the alert, identify, rotate, prove, resolve; or send
// GitGuardian's alert) run a few at a time from a bounded queue. A place is reserved before the
// delivery is recorded, so a delivery refused because the queue is full (503 intake-busy) is not
// spent: the scanner's redelivery is accepted later. Jobs run through `background`, where the
// daemon's shutdown waits for them.
//
// Two lanes share the capacity but not the runners. A scanner's delivery is the leak reported
// now; the reconcile's alerts are the ones whose delivery failed, or is being handled by another
// replica at that moment (its gate cannot see that replica's jobs). So the reconcile runs on
// runners of its own and never holds one a delivery waits for (issue 30: in the ha bench a new
// leader's reconcile took two of four runners for alerts another replica was handling, and the
// deliveries behind them waited up to 1.1 s).
export interface IntakeQueueOptions {
  /** Delivery jobs running at once. */
  concurrency: number;
  /** Reconcile jobs running at once, besides the deliveries' runners. */
  reconcileConcurrency: number;
  /** Jobs running, waiting or reserved, at most (both lanes). */
  capacity: number;
  /** Takes the promise of each job's end (the daemon tracks it for shutdown). Must not throw. */
  background: (work: Promise<void>) => void;
}

/** Whose runners a job takes: a scanner's delivery, or an alert the reconcile listed. */
export type QueueLane = 'delivery' | 'reconcile';

export interface QueuePlace {
  /** Queues the job in this place; it starts when one of its lane's runners is free. */
  run(job: () => Promise<void>): void;
  /** Gives the place back unused. */
  release(): void;
}

export const DEFAULT_INTAKE_QUEUE = { concurrency: 4, reconcileConcurrency: 2, capacity: 64 } as const;

interface Lane {
  limit: number;
  running: number;
  readonly waiting: (() => void)[];
}

export class IntakeQueue {
  readonly #options: IntakeQueueOptions;
  #taken = 0;
  readonly #lanes: Record<QueueLane, Lane>;

  constructor(options: IntakeQueueOptions) {
    this.#options = options;
    this.#lanes = {
      delivery: { limit: options.concurrency, running: 0, waiting: [] },
      reconcile: { limit: options.reconcileConcurrency, running: 0, waiting: [] },
    };
  }

  /** Delivery jobs that run at once. */
  get concurrency(): number {
    return this.#options.concurrency;
  }

  /** Reconcile jobs that run at once. */
  get reconcileConcurrency(): number {
    return this.#options.reconcileConcurrency;
  }

  /** Places taken (running, waiting or reserved). */
  get size(): number {
    return this.#taken;
  }

  /** A place for one job in `lane`, or undefined when `capacity` are taken. */
  reserve(lane: QueueLane = 'delivery'): QueuePlace | undefined {
    if (this.#taken >= this.#options.capacity) return undefined;
    this.#taken += 1;
    let used = false;
    return {
      run: (job) => {
        if (used) return;
        used = true;
        this.#options.background(this.#runInTurn(this.#lanes[lane], job));
      },
      release: () => {
        if (used) return;
        used = true;
        this.#taken -= 1;
      },
    };
  }

  async #runInTurn(lane: Lane, job: () => Promise<void>): Promise<void> {
    // A runner that finishes hands its turn straight to the next waiting job (running stays counted).
    if (lane.running < lane.limit) lane.running += 1;
    else await new Promise<void>((resolve) => lane.waiting.push(resolve));
    try {
      await job();
    } catch {
      // Jobs report their own failures (audit and alert); one that throws anyway must not stop the queue.
    } finally {
      this.#taken -= 1;
      const next = lane.waiting.shift();
      if (next === undefined) lane.running -= 1;
      else next();
    }
  }
}
