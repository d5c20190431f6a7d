// When the leak reconcile runs (invariant 13): once right after start, then every
// `intake.github.reconcileInterval` of the policy in force, measured from the end of the previous
// pass so a slow GitHub never stacks passes up. Passes never overlap: asking while one runs joins
// it. The pass itself decides whether there is anything to do (no reconcile configured, the rate
// budget spent); this loop only keeps time. Work that must run on one replica only (issue 30's
// Lease) gates `request` and nothing else.

export interface ReconcileLoopOptions {
  /** One pass. Must not reject (reconcileOpenAlerts never does); a rejection goes to onError. */
  reconcileOnce: () => Promise<unknown>;
  /** The interval of the policy in force, read each time the timer is armed; undefined: none. */
  intervalMs: () => number | undefined;
  /** Registers the work a shutdown waits for. */
  track: <T>(work: Promise<T>) => Promise<T>;
  onError: (error: unknown) => void;
}

export class ReconcileLoop {
  readonly #options: ReconcileLoopOptions;
  #running: Promise<void> | undefined;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: ReconcileLoopOptions) {
    this.#options = options;
  }

  /** Runs a pass now, or joins the one in progress. Never rejects. */
  request(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    this.#running ??= this.#options
      .track(this.#options.reconcileOnce())
      .then(
        () => undefined,
        (error: unknown) => {
          this.#options.onError(error);
        },
      )
      .finally(() => {
        this.#running = undefined;
      });
    return this.#running;
  }

  /** Arms the timer for the next pass with the interval in force (after start and every reload). */
  scheduleNext(): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    const intervalMs = this.#options.intervalMs();
    if (intervalMs === undefined) return;
    this.#timer = setTimeout(() => {
      void this.request().finally(() => {
        this.scheduleNext();
      });
    }, intervalMs);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }
}
