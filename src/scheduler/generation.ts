// One loaded policy and everything built from it: the runtime (API client, backends, alerter),
// the consumers' refresh (its restart queue coalesces every run of the generation) and the cron
// jobs. SIGHUP builds a new generation beside the old one and swaps them; the old
// runtime is closed only when the last run that uses it is over, so a reload never cuts a
// rotation between its roll and its store.
import type { ConsumerRefresher } from '../consumers/public/refresher.ts';
import type { Policy } from '../policy/public/schema.ts';
import type { Runtime } from '../rotation/public/runtime.ts';
import type { ScheduledJobs } from './schedule.ts';

export class Generation {
  readonly policy: Policy;
  readonly runtime: Runtime;
  /** Absent in tests that build a generation by hand: nothing is refreshed. */
  readonly refresher: ConsumerRefresher | undefined;
  #jobs: ScheduledJobs | undefined;
  #users = 0;
  #retired = false;
  #closing = false;
  readonly #closed: Promise<void>;
  #markClosed: () => void = () => undefined;
  readonly #onCloseError: (error: unknown) => void;

  constructor(
    policy: Policy,
    runtime: Runtime,
    onCloseError: (error: unknown) => void,
    refresher?: ConsumerRefresher,
  ) {
    this.policy = policy;
    this.runtime = runtime;
    this.refresher = refresher;
    this.#onCloseError = onCloseError;
    this.#closed = new Promise<void>((resolve) => {
      this.#markClosed = resolve;
    });
  }

  get jobs(): ScheduledJobs | undefined {
    return this.#jobs;
  }

  startJobs(start: () => ScheduledJobs): void {
    this.#jobs?.stop();
    this.#jobs = start();
  }

  stopJobs(): void {
    this.#jobs?.stop();
  }

  /** Marks one run (or sweep) as using this generation; call the returned function when it ends. */
  use(): () => void {
    this.#users += 1;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#users -= 1;
      if (this.#retired && this.#users === 0) this.#close();
    };
  }

  /** Stops the jobs and closes the runtime once nothing uses it any more; resolves when closed. */
  retire(): Promise<void> {
    this.stopJobs();
    this.#retired = true;
    if (this.#users === 0) this.#close();
    return this.#closed;
  }

  #close(): void {
    if (this.#closing) return;
    this.#closing = true;
    this.runtime
      .close()
      .catch((error: unknown) => {
        this.#onCloseError(error);
      })
      .finally(() => {
        this.#markClosed();
      });
  }
}
