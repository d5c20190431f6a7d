// One leader among the daemon's replicas, on a coordination.k8s.io/v1 Lease, the way client-go's
// leaderelection does it (tools/leaderelection/leaderelection.go), since @kubernetes/client-node
// ships no leader election of its own:
// - every retry period each replica reads the Lease; the holder writes renewTime, a candidate
//   writes its own identity once the Lease is free or expired; every write names the
//   resourceVersion it read, so of two candidates only one lands (optimistic concurrency);
// - "expired" is judged on the candidate's own monotonic clock, from the moment it saw the
//   record change, never from the renewTime in it: the replicas' wall clocks may disagree;
// - the holder counts its renew deadline from the moment it SENT its last successful renew
//   (before the write landed, so before any candidate could have seen it). renewDeadline <
//   leaseDuration, so it stops starting work strictly before any candidate may take over; the
//   stop is at once (a timer, and isLeader() reads the clock itself, so a process that was paused
//   past its deadline sees it before it starts anything);
// - stop() hands over: it stops the work, then clears holderIdentity, so a candidate takes the
//   Lease on its next retry instead of waiting the lease duration out.
// The Lease only saves work; the fence stays the backend key lock (docs/design.md, invariant 5).
import { LeaderError } from './errors.ts';
import type { LeaseRecord, LeaseStore, StoredLease } from './lease-store.ts';

export interface ElectionTimings {
  /** How long a candidate waits, from the last change it saw, before it takes a Lease over. */
  leaseDurationMs: number;
  /** How long the holder keeps leading without a successful renew. Less than leaseDurationMs. */
  renewDeadlineMs: number;
  /** How often every replica reads (and the holder renews) the Lease. */
  retryPeriodMs: number;
}

/** client-go's defaults (and kube-controller-manager's): 15 s, 10 s, 2 s. */
export const ELECTION_DEFAULTS: ElectionTimings = {
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
};

/** client-go's JitterFactor: a candidate waits retryPeriod × [1, 1.2] between tries, so two do not stay in step. */
const CANDIDATE_JITTER = 0.2;

/**
 * Why a leader stopped leading: its renew deadline passed without a successful renew, it saw
 * another holder in the Lease, or it released the Lease (shutdown).
 */
export type LossReason = 'renew-deadline' | 'taken' | 'released';

/** One stretch of leadership. `signal` is aborted (with LeaderError KR_LEADER_LOST) the moment it ends. */
export interface LeaderTerm {
  readonly signal: AbortSignal;
  /** The Lease's leaseTransitions when this term began. */
  readonly transitions: number;
}

export interface ElectorEvents {
  startedLeading(term: LeaderTerm): void;
  stoppedLeading(term: LeaderTerm, why: LossReason, lastError: unknown): void;
  /** A read or write of the Lease failed; the elector tries again after the retry period. */
  failed(error: unknown, leading: boolean): void;
}

export interface ElectorOptions extends ElectionTimings {
  store: LeaseStore;
  /** This replica's name in the Lease: the pod name. */
  identity: string;
  events: ElectorEvents;
  /** Monotonic milliseconds (default performance.now): leadership is timed on it, never on the wall clock. */
  clock?: () => number;
  /** The wall clock written into acquireTime/renewTime (for people reading the Lease). */
  now?: () => Date;
  random?: () => number;
}

/** What is wrong with the timings, in a sentence; undefined when they hold client-go's rules. */
export function checkTimings(timings: ElectionTimings): string | undefined {
  const { leaseDurationMs, renewDeadlineMs, retryPeriodMs } = timings;
  for (const [name, value] of Object.entries({ leaseDurationMs, renewDeadlineMs, retryPeriodMs }))
    if (!Number.isFinite(value) || value <= 0) return `${name} must be a positive duration`;
  if (leaseDurationMs % 1000 !== 0)
    return 'the lease duration must be whole seconds (the Lease stores leaseDurationSeconds)';
  if (renewDeadlineMs >= leaseDurationMs)
    return 'the renew deadline must be shorter than the lease duration (a leader must stop before a candidate may take over)';
  if (retryPeriodMs * (1 + CANDIDATE_JITTER) >= renewDeadlineMs)
    return 'the retry period (× 1.2) must be shorter than the renew deadline (a leader must get more than one try to renew)';
  return undefined;
}

type Attempt = 'held' | 'other' | 'conflict';

export class LeaderElector {
  readonly #options: ElectorOptions;
  readonly #clock: () => number;
  readonly #now: () => Date;
  #observed: StoredLease | undefined;
  /** Monotonic time when the record last changed under our eyes. */
  #observedAt = 0;
  #term: { controller: AbortController; transitions: number } | undefined;
  /** Monotonic time the last successful renew (or the acquire) was sent. */
  #renewedAt = 0;
  #lossTimer: NodeJS.Timeout | undefined;
  #loop: Promise<void> | undefined;
  #stopped = false;
  #request: AbortController | undefined;
  #wake: (() => void) | undefined;
  /** The last failure since the last success: what a lost term names as its cause. */
  #lastError: unknown;

  constructor(options: ElectorOptions) {
    const problem = checkTimings(options);
    if (problem !== undefined) throw new RangeError(problem);
    this.#options = options;
    this.#clock = options.clock ?? (() => performance.now());
    this.#now = options.now ?? (() => new Date());
  }

  get identity(): string {
    return this.#options.identity;
  }

  get lease(): string {
    return this.#options.store.describe;
  }

  /** Leading, and the renew deadline not passed: the only question work that must run once asks. */
  isLeader(): boolean {
    return this.#term !== undefined && this.#clock() < this.#renewedAt + this.#options.renewDeadlineMs;
  }

  /** The current term's signal (aborted when it ends); undefined when not leading. */
  termSignal(): AbortSignal | undefined {
    return this.isLeader() ? this.#term?.controller.signal : undefined;
  }

  /** Begins trying to acquire the Lease, then keeps renewing it. Idempotent. */
  start(): void {
    this.#loop ??= this.#run();
  }

  /**
   * Stops trying. A leader stops leading first (its term's signal aborts), then clears
   * holderIdentity so another replica takes over on its next retry. Never rejects; a failed
   * release is reported through `failed` (the Lease then expires on its own).
   */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    this.#request?.abort();
    this.#wake?.();
    await this.#loop;
    const wasLeading = this.#term !== undefined;
    this.#lose('released');
    if (wasLeading) await this.#release();
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      await this.#attempt();
      if (this.#halted()) return;
      const { retryPeriodMs } = this.#options;
      await this.#sleep(
        this.#term
          ? retryPeriodMs
          : retryPeriodMs * (1 + CANDIDATE_JITTER * (this.#options.random ?? Math.random)()),
      );
    }
  }

  // A method, not an inline test: TypeScript would keep the narrowing of #stopped from before an await.
  #halted(): boolean {
    return this.#stopped;
  }

  async #attempt(): Promise<void> {
    const sentAt = this.#clock();
    // A leader's request never outlives its renew deadline; a candidate's gets as long.
    const budget = Math.ceil(
      this.#term
        ? Math.max(1, this.#renewedAt + this.#options.renewDeadlineMs - sentAt)
        : this.#options.renewDeadlineMs,
    );
    const request = new AbortController();
    this.#request = request;
    try {
      const result = await this.#tryAcquireOrRenew(
        AbortSignal.any([request.signal, AbortSignal.timeout(budget)]),
      );
      if (this.#stopped) return;
      if (result === 'held') this.#renewed(sentAt);
      else if (result === 'other') this.#lose('taken');
      else if (this.#term)
        this.#options.events.failed(
          new LeaderError(
            'KR_LEADER_CONFLICT',
            `renew Lease ${this.lease}: written by another replica since it was read`,
          ),
          true,
        );
    } catch (error) {
      this.#lastError = error;
      if (!this.#stopped) this.#options.events.failed(error, this.#term !== undefined);
    } finally {
      this.#request = undefined;
    }
  }

  /** client-go's tryAcquireOrRenew: read, decide, write under the version read. */
  async #tryAcquireOrRenew(signal: AbortSignal): Promise<Attempt> {
    const { store, identity } = this.#options;
    const now = this.#now();
    const current = await store.get(signal);
    if (current === undefined) {
      try {
        this.#observe(await store.create(this.#recordOf(undefined, now), signal));
      } catch (error) {
        if (error instanceof LeaderError && error.code === 'KR_LEADER_CONFLICT') return 'conflict';
        throw error;
      }
      return 'held';
    }
    this.#observe(current);
    const holder = current.record.holderIdentity ?? '';
    if (holder !== identity) {
      // Someone else's name: a leader was taken over (its deadline should have ended it first);
      // a candidate waits until that holder's lease, timed from our own observation, has run out.
      if (this.#term) return 'other';
      if (holder !== '' && this.#clock() < this.#observedAt + this.#options.leaseDurationMs) return 'other';
    }
    try {
      this.#observe(await store.update(this.#recordOf(current.record, now), current.resourceVersion, signal));
    } catch (error) {
      if (error instanceof LeaderError && error.code === 'KR_LEADER_CONFLICT') return 'conflict';
      throw error;
    }
    return 'held';
  }

  #recordOf(previous: LeaseRecord | undefined, now: Date): LeaseRecord {
    const ours = previous?.holderIdentity === this.#options.identity;
    return {
      holderIdentity: this.#options.identity,
      leaseDurationSeconds: this.#options.leaseDurationMs / 1000,
      acquireTime: ours ? (previous.acquireTime ?? now) : now,
      renewTime: now,
      leaseTransitions: (previous?.leaseTransitions ?? 0) + (previous === undefined || ours ? 0 : 1),
    };
  }

  #observe(lease: StoredLease): void {
    if (lease.resourceVersion === this.#observed?.resourceVersion) return;
    this.#observed = lease;
    this.#observedAt = this.#clock();
  }

  #renewed(sentAt: number): void {
    this.#lastError = undefined;
    // An answer that came after its own deadline (a paused process, a slow API server) proves
    // nothing about now: it neither revives nor begins a term; the next attempt decides.
    if (sentAt + this.#options.renewDeadlineMs <= this.#clock()) return;
    this.#renewedAt = sentAt;
    clearTimeout(this.#lossTimer);
    this.#lossTimer = setTimeout(
      () => {
        this.#lose('renew-deadline');
      },
      Math.max(0, sentAt + this.#options.renewDeadlineMs - this.#clock()),
    );
    if (this.#term) return;
    const term = {
      controller: new AbortController(),
      transitions: this.#observed?.record.leaseTransitions ?? 0,
    };
    this.#term = term;
    this.#options.events.startedLeading({ signal: term.controller.signal, transitions: term.transitions });
  }

  #lose(why: LossReason): void {
    const term = this.#term;
    if (term === undefined) return;
    this.#term = undefined;
    clearTimeout(this.#lossTimer);
    term.controller.abort(
      new LeaderError('KR_LEADER_LOST', `no longer the leader of Lease ${this.lease} (${why})`),
    );
    this.#options.events.stoppedLeading(
      { signal: term.controller.signal, transitions: term.transitions },
      why,
      this.#lastError,
    );
  }

  /** Clears holderIdentity if the Lease still names us (client-go's release: leaseDurationSeconds 1, times now). */
  async #release(): Promise<void> {
    const { store, identity, renewDeadlineMs } = this.#options;
    const signal = AbortSignal.timeout(renewDeadlineMs);
    try {
      const current = await store.get(signal);
      if (current?.record.holderIdentity !== identity) return;
      const now = this.#now();
      await store.update(
        {
          holderIdentity: '',
          leaseDurationSeconds: 1,
          acquireTime: now,
          renewTime: now,
          leaseTransitions: current.record.leaseTransitions ?? 0,
        },
        current.resourceVersion,
        signal,
      );
    } catch (error) {
      this.#options.events.failed(error, false);
    }
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    });
  }
}
