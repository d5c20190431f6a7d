// When sweeps run: one right after start (and after each reload), then every check interval,
// measured from the end of the previous sweep so a slow backend never stacks sweeps up. Sweeps
// never overlap: asking for one while another runs makes one more pass right after it.

export interface SweepLoopOptions {
  /** One pass; `recheckReadiness` is false when a readiness check has just been made. */
  sweepOnce: (recheckReadiness: boolean) => Promise<void>;
  intervalMs: number;
  /** Registers the work a shutdown waits for. */
  track: <T>(work: Promise<T>) => Promise<T>;
  onError: (error: unknown) => void;
}

export class SweepLoop {
  readonly #options: SweepLoopOptions;
  #running: Promise<void> | undefined;
  #again = false;
  #recheck = false;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;

  constructor(options: SweepLoopOptions) {
    this.#options = options;
  }

  /** Runs a sweep now, or right after the one in progress. Never rejects. */
  request(recheckReadiness = true): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    this.#recheck ||= recheckReadiness;
    if (this.#running) {
      this.#again = true;
      return this.#running;
    }
    this.#running = this.#options.track(this.#passes()).finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  /** Arms the timer for the next periodic sweep. */
  scheduleNext(): void {
    if (this.#stopped) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      void this.request().finally(() => {
        this.scheduleNext();
      });
    }, this.#options.intervalMs);
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  async #passes(): Promise<void> {
    do {
      this.#again = false;
      const recheck = this.#recheck;
      this.#recheck = false;
      try {
        await this.#options.sweepOnce(recheck);
      } catch (error) {
        this.#options.onError(error);
      }
    } while (this.#wantsAnother());
  }

  // A method, not an inline test: TypeScript would keep the narrowing of #again from before the await.
  #wantsAnother(): boolean {
    return this.#again && !this.#stopped;
  }
}
