// Keeps a key's locks alive for the whole roll → store → verify (long work under the key lock,
// key-lock.ts says what the locks are and why), and answers, before each roll attempt, whether this
// runner still holds them long enough for the attempt and the writes after it. The primary's lock
// is the one bookkeeping and recovery go by. The locks are refreshed together and share one lease.
//
// The lease is judged on this process's monotonic clock from the moment each take or refresh
// was *sent*: the backend stamps the expiry no earlier than that, and other runners take the
// lock over only `clockSkewMs` after the expiry by their own clocks, so while the lease lasts by
// our clock nobody else can hold the lock (given skew within clockSkewMs). A paused process
// (SIGSTOP, GC, a frozen VM) outlives its lease without knowing; that is what the fence on every
// write is for (WriteFence): the backend refuses the write of a runner whose lock moved on.
//
// Refreshes run in the background every third of the TTL, except while a roll attempt and the
// store after it are in flight (`hold`): between the roll answer and the write nothing else may
// do I/O (invariant 2), so the lease is made long enough for both before the attempt is sent.
import type { HeldLock, WriteFence } from '../backends/public/types.ts';
import { errorCode } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { RotationStepError } from './errors.ts';
import type { ResolvedDestination, RotationStep } from './types.ts';

/** A destination's lock as this rotation holds it. */
export interface KeptLock {
  destination: ResolvedDestination;
  lock: HeldLock;
}

export interface LockKeeperOptions {
  key: KeyPolicy;
  /** The locks as taken, the primary destination's first, and the monotonic time the first take was sent. */
  locks: readonly KeptLock[];
  takenAtMs: number;
  monotonicMs: () => number;
  /** Called once when a refresh finds the lock taken by another runner (for the audit). */
  onLost?: () => void;
  /** Called when a background refresh fails to reach the backend (for the audit). */
  onRefreshError?: (code: string) => void;
}

export class LockKeeper {
  readonly #options: LockKeeperOptions;
  readonly #locks: KeptLock[];
  /** The primary's entry of #locks (the same object, updated by each refresh). */
  readonly #primary: KeptLock;
  #validUntilMs: number;
  #lost = false;
  #holds = 0;
  #stopped = false;
  #timer: NodeJS.Timeout | undefined;
  #refreshing: Promise<void> | undefined;

  constructor(options: LockKeeperOptions) {
    this.#options = options;
    this.#locks = options.locks.map((kept) => ({ ...kept }));
    const [primary] = this.#locks;
    if (primary === undefined) throw new Error("a lock keeper needs the primary destination's lock");
    this.#primary = primary;
    this.#validUntilMs = options.takenAtMs + options.key.lockTtlMs;
  }

  /** The primary destination's lock as last refreshed. */
  get lock(): HeldLock {
    return this.#primary.lock;
  }

  /** Every lock this rotation holds, the primary's first, as last refreshed. */
  get locks(): readonly KeptLock[] {
    return this.#locks;
  }

  /** True when any of the locks was taken over from a stale holder, who may still act. */
  get tookOver(): boolean {
    return this.#locks.some((kept) => kept.lock.tookOver);
  }

  /**
   * The fence a write to `destination` carries: its own lock as last refreshed (invariant 9).
   * Undefined for a place this rotation holds no lock of (a fallback, which is not locked).
   */
  fenceFor(destination: ResolvedDestination): WriteFence | undefined {
    const kept = this.#locks.find((candidate) => candidate.destination === destination);
    return kept === undefined ? undefined : { lock: kept.lock };
  }

  /** True once a refresh found the lock held by someone else (or gone). */
  get lost(): boolean {
    return this.#lost;
  }

  /** Milliseconds of lease left by this process's clock. */
  remainingMs(): number {
    return this.#validUntilMs - this.#options.monotonicMs();
  }

  start(): void {
    this.#schedule();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /**
   * Before a roll attempt: proves the lock is still ours with `neededMs` of lease left (the
   * attempt and the write after it), refreshing first when less is left, then holds background
   * refreshes until `release`. Throws KR_LOCK_LOST (nothing rolled by this attempt) otherwise.
   */
  async holdFor(neededMs: number, step: RotationStep): Promise<void> {
    await this.#refreshing;
    // A lease that ran out by our clock may still be ours (nobody took it): the refresh tells.
    if (this.#lost) this.#assertHeld(step);
    if (this.remainingMs() < neededMs) {
      await this.refresh();
      this.#assertHeld(step);
      if (this.remainingMs() < neededMs) {
        throw new RotationStepError(
          step,
          this.#options.key.id,
          'KR_LOCK_LOST',
          `the key lock cannot be made to last the roll and the write (${String(neededMs)} ms needed); lockTtl is too short`,
        );
      }
    }
    this.#holds++;
  }

  /** The attempt (and its store) is over: background refreshes may run again. */
  release(): void {
    if (this.#holds > 0) this.#holds--;
  }

  /** Throws KR_LOCK_LOST when the lock is known lost or its lease ran out by this process's clock. */
  assertHeld(step: RotationStep): void {
    this.#assertHeld(step);
  }

  /**
   * Refreshes now. One refresh at a time: two in flight would race each other's check-and-set
   * and the loser would read as a lost lock. A backend that cannot answer leaves the lease to
   * run out by itself (the next attempt then stops on KR_LOCK_LOST); it never throws.
   */
  refresh(): Promise<void> {
    this.#refreshing ??= this.#refreshOnce().finally(() => {
      this.#refreshing = undefined;
    });
    return this.#refreshing;
  }

  async #refreshOnce(): Promise<void> {
    if (this.#lost) return;
    const sentAtMs = this.#options.monotonicMs();
    const { key } = this.#options;
    // The lease is extended only once every lock is: a lock left unrefreshed runs out on its own.
    for (const kept of this.#locks) {
      try {
        const refreshed = await kept.destination.backend.refreshLock(
          kept.destination.target,
          kept.lock,
          key.lockTtlMs,
        );
        if (refreshed === undefined) {
          this.#markLost();
          return;
        }
        kept.lock = refreshed;
      } catch (error) {
        this.#options.onRefreshError?.(errorCode(error));
        return;
      }
    }
    this.#validUntilMs = sentAtMs + key.lockTtlMs;
  }

  #assertHeld(step: RotationStep): void {
    if (this.#lost) {
      throw new RotationStepError(
        step,
        this.#options.key.id,
        'KR_LOCK_LOST',
        'another runner took over the key lock; this runner stopped and wrote nothing more',
      );
    }
    if (this.remainingMs() <= 0) {
      throw new RotationStepError(
        step,
        this.#options.key.id,
        'KR_LOCK_LOST',
        'the key lock could not be refreshed before it expired; this runner stopped and wrote nothing more',
      );
    }
  }

  #markLost(): void {
    if (this.#lost) return;
    this.#lost = true;
    this.#options.onLost?.();
  }

  #schedule(): void {
    if (this.#stopped) return;
    const intervalMs = Math.max(50, Math.floor(this.#options.key.lockTtlMs / 3));
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      if (this.#stopped || this.#lost) return;
      if (this.#holds > 0) {
        this.#schedule();
        return;
      }
      void this.refresh().finally(() => {
        this.#schedule();
      });
    }, intervalMs);
    // A lock keeper never keeps the process alive on its own.
    this.#timer.unref();
  }
}
