// Workload restarts, never a storm (invariant 12): one job per workload, started in the order the
// jobs were asked for, at most `cap` running at once (a job runs from its restart patch until its
// rollout completes or times out). A job that has not started yet takes in every later request for
// its workload: a run, or leak reports seconds apart, whose keys share a workload restart it once,
// after every sync any of them waits for. A request that comes after the job started gets a new job
// behind it: the running restart may have begun before that value was synced.
import { consumerKey, type KubeConsumerRef } from './refs.ts';

export interface RestartJob {
  workload: KubeConsumerRef;
  /** Rotation ids the restart is for, in the order they were asked for. */
  rotationIds: string[];
  /** Whether any of them is urgent (its held value died: the window does not apply). */
  urgent: boolean;
  /** What the job waits for before it may restart (owed markers written, syncs done); failures included. */
  prerequisites: Promise<unknown>[];
  /** Told when the restart patch landed (each request's listener). */
  notified: ((atMs: number) => void)[];
}

export interface RestartRequest {
  workload: KubeConsumerRef;
  rotationIds: readonly string[];
  urgent: boolean;
  prerequisites: readonly Promise<unknown>[];
  onNotified?: (atMs: number) => void;
}

/** How a job ends: `held` is false when it needed no slot (it deferred, or had nothing to do). */
export interface JobRun<R> {
  /** Runs once the job's prerequisites settled and its turn came, before it takes a slot: may answer without restarting (the window is closed). */
  beforeSlot(job: RestartJob): Promise<R | undefined>;
  /** Runs holding a slot: the restart and the wait for its rollout. */
  withSlot(job: RestartJob): Promise<R>;
}

interface QueuedJob<R> extends RestartJob {
  started: boolean;
  done: Promise<R>;
}

export class RestartQueue<R> {
  readonly #cap: number;
  readonly #run: JobRun<R>;
  #running = 0;
  readonly #waitingForSlot: (() => void)[] = [];
  /** The turn of the last job asked for: a job takes its turn only after every earlier one took theirs. */
  #lastTurn: Promise<void> = Promise.resolve();
  /** Jobs not started yet, by workload: later requests join them. */
  readonly #open = new Map<string, QueuedJob<R>>();
  /** The last job of each workload: a new one runs after it (one restart of a workload at a time). */
  readonly #lastOf = new Map<string, Promise<unknown>>();

  constructor(cap: number, run: JobRun<R>) {
    this.#cap = cap;
    this.#run = run;
  }

  /** Restarts the workload once for these rotations (joining a job not started yet); resolves with its result. */
  request(request: RestartRequest): Promise<R> {
    const key = consumerKey(request.workload);
    const open = this.#open.get(key);
    if (open !== undefined && !open.started) {
      for (const id of request.rotationIds) if (!open.rotationIds.includes(id)) open.rotationIds.push(id);
      open.urgent ||= request.urgent;
      open.prerequisites.push(...request.prerequisites);
      if (request.onNotified) open.notified.push(request.onNotified);
      return open.done;
    }
    const job: QueuedJob<R> = {
      workload: request.workload,
      rotationIds: [...request.rotationIds],
      urgent: request.urgent,
      prerequisites: [...request.prerequisites],
      notified: request.onNotified ? [request.onNotified] : [],
      started: false,
      done: Promise.resolve(undefined as R),
    };
    const previousTurn = this.#lastTurn;
    let turnTaken: () => void = () => undefined;
    this.#lastTurn = new Promise((resolve) => {
      turnTaken = resolve;
    });
    const before = this.#lastOf.get(key) ?? Promise.resolve();
    job.done = this.#runJob(job, key, previousTurn, turnTaken, before);
    this.#open.set(key, job);
    this.#lastOf.set(
      key,
      job.done.catch(() => undefined),
    );
    return job.done;
  }

  async #runJob(
    job: QueuedJob<R>,
    key: string,
    previousTurn: Promise<void>,
    turnTaken: () => void,
    before: Promise<unknown>,
  ): Promise<R> {
    let tookTurn = false;
    const takeTurn = (): void => {
      if (!tookTurn) {
        tookTurn = true;
        turnTaken();
      }
    };
    try {
      // Every prerequisite, those that joined while waiting included.
      for (let seen = 0; seen < job.prerequisites.length;) {
        const batch = job.prerequisites.slice(seen);
        seen = job.prerequisites.length;
        await Promise.allSettled(batch);
      }
      await previousTurn;
      await before;
      job.started = true;
      if (this.#open.get(key) === job) this.#open.delete(key);
      const early = await this.#run.beforeSlot(job);
      if (early !== undefined) return early;
      await this.#acquire();
      takeTurn();
      try {
        return await this.#run.withSlot(job);
      } finally {
        this.#release();
      }
    } finally {
      job.started = true;
      if (this.#open.get(key) === job) this.#open.delete(key);
      takeTurn();
    }
  }

  async #acquire(): Promise<void> {
    if (this.#running < this.#cap) {
      this.#running += 1;
      return;
    }
    await new Promise<void>((resolve) => this.#waitingForSlot.push(resolve));
  }

  #release(): void {
    const next = this.#waitingForSlot.shift();
    if (next === undefined) this.#running -= 1;
    else next();
  }
}
