// The leak intake's background jobs (fetch the alert, identify, rotate, prove, resolve; or send
// GitGuardian's alert) run a few at a time from a bounded queue. A place is reserved before the
// delivery is recorded, so a delivery refused because the queue is full (503 intake-busy) is not
// spent: the scanner's redelivery is accepted later. Jobs run through `background`, where the
// daemon's shutdown waits for them.
export interface IntakeQueueOptions {
  /** Jobs running at once. */
  concurrency: number;
  /** Jobs running, waiting or reserved, at most. */
  capacity: number;
  /** Takes the promise of each job's end (the daemon tracks it for shutdown). Must not throw. */
  background: (work: Promise<void>) => void;
}

export interface QueuePlace {
  /** Queues the job in this place; it starts when one of `concurrency` runners is free. */
  run(job: () => Promise<void>): void;
  /** Gives the place back unused. */
  release(): void;
}

export const DEFAULT_INTAKE_QUEUE = { concurrency: 4, capacity: 64 } as const;

export class IntakeQueue {
  readonly #options: IntakeQueueOptions;
  #taken = 0;
  #running = 0;
  readonly #waiting: (() => void)[] = [];

  constructor(options: IntakeQueueOptions) {
    this.#options = options;
  }

  /** Jobs that run at once. */
  get concurrency(): number {
    return this.#options.concurrency;
  }

  /** Places taken (running, waiting or reserved). */
  get size(): number {
    return this.#taken;
  }

  /** A place for one job, or undefined when `capacity` are taken. */
  reserve(): QueuePlace | undefined {
    if (this.#taken >= this.#options.capacity) return undefined;
    this.#taken += 1;
    let used = false;
    return {
      run: (job) => {
        if (used) return;
        used = true;
        this.#options.background(this.#runInTurn(job));
      },
      release: () => {
        if (used) return;
        used = true;
        this.#taken -= 1;
      },
    };
  }

  async #runInTurn(job: () => Promise<void>): Promise<void> {
    // A runner that finishes hands its turn straight to the next waiting job (running stays counted).
    if (this.#running < this.#options.concurrency) this.#running += 1;
    else await new Promise<void>((resolve) => this.#waiting.push(resolve));
    try {
      await job();
    } catch {
      // Jobs report their own failures (audit and alert); one that throws anyway must not stop the queue.
    } finally {
      this.#taken -= 1;
      const next = this.#waiting.shift();
      if (next === undefined) this.#running -= 1;
      else next();
    }
  }
}
