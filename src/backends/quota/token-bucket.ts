// A token bucket for one request quota of a backend (AWS Secrets Manager's write group of one
// account and region, say), shared by every caller in the process (invariant 11: a quota is a
// budget, not a failure). It is kept in the GCRA form: one "theoretical arrival time" instead of
// a token count and a timer, so a caller learns at once how long its turn is away, turns are
// handed out in call order (no waiter starves), and tokens taken ahead of time (a reservation
// for the write after a roll) are simply a turn taken early.
// Waits are computed, not polled: a caller sleeps exactly until its turn. A throttle answer from
// the server (another writer in the account used the budget) pauses the bucket for everyone and
// halves its rate, once per pause (the answers of one crowded moment are one event); each answer
// that was not a throttle gives a twentieth of the stated rate back (additive increase,
// multiplicative decrease, as TCP does). In a busy account the callers settle near what the others
// leave instead of being refused over and over; alone they are back at the stated rate within
// twenty answers.
import { setTimeout as delay } from 'node:timers/promises';

export interface TokenBucketOptions {
  /** Tokens per second, on average. */
  ratePerSecond: number;
  /** Tokens that may be taken back to back before the rate applies; default half a second's worth. */
  burst?: number;
  nowMs?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export interface TakeOptions {
  /** Take nothing and answer undefined when the turn is further away than this. */
  maxWaitMs?: number;
  /** Aborts the wait; the tokens are given back. */
  signal?: AbortSignal;
}

/** The lowest share of its stated rate a bucket slows down to after throttle answers. */
const MIN_RATE_SHARE = 1 / 10;
/** What one answer that was not a throttle gives back, as a share of the stated rate. */
const RECOVERY_SHARE = 1 / 20;

export class TokenBucket {
  /** The stated rate (the quota); `currentRate` may be lower after throttle answers. */
  readonly ratePerSecond: number;
  readonly burst: number;
  #intervalMs: number;
  #burstMs: number;
  readonly #now: () => number;
  readonly #sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** When the bucket would be full again if nobody took more (GCRA's theoretical arrival time). */
  #fullAtMs: number;
  #pausedUntilMs = 0;

  constructor(options: TokenBucketOptions) {
    if (!Number.isFinite(options.ratePerSecond) || options.ratePerSecond <= 0)
      throw new RangeError('a token bucket needs a positive rate');
    this.ratePerSecond = options.ratePerSecond;
    // Half a second by default, not a whole one: the server's own bucket sees our requests after
    // a varying delay, and a client holding the server's whole burst has no margin for that jitter
    // (the same reasoning as the API's rate limiter, src/api/rate-limiter.ts).
    this.burst = Math.max(1, options.burst ?? Math.floor(options.ratePerSecond / 2));
    this.#intervalMs = 1000 / options.ratePerSecond;
    this.#burstMs = this.burst * this.#intervalMs;
    this.#now = options.nowMs ?? Date.now;
    this.#sleep =
      options.sleep ?? ((ms, signal) => delay(ms, undefined, signal === undefined ? {} : { signal }));
    this.#fullAtMs = this.#now();
  }

  /** Tokens per second now: the stated rate, or less after throttle answers. */
  get currentRate(): number {
    return 1000 / this.#intervalMs;
  }

  /** How long a take of `count` tokens would wait now (0: at once). */
  waitFor(count = 1): number {
    return this.#turn(count).waitMs;
  }

  /**
   * Takes `count` tokens, waiting for them after every caller that asked first. Resolves with the
   * milliseconds waited, or undefined (nothing taken) when the turn is further than `maxWaitMs`.
   */
  async take(count = 1, options: TakeOptions = {}): Promise<number | undefined> {
    const turn = this.#turn(count);
    if (options.maxWaitMs !== undefined && turn.waitMs > options.maxWaitMs) return undefined;
    this.#fullAtMs = turn.fullAtMs;
    const startedMs = this.#now();
    try {
      let waitMs = turn.waitMs;
      // A pause that began while this caller slept (a throttle answer) holds it too.
      while (waitMs > 0) {
        await this.#sleep(waitMs, options.signal);
        waitMs = Math.max(0, this.#pausedUntilMs - this.#now());
      }
    } catch (error) {
      this.giveBack(count);
      throw error;
    }
    return this.#now() - startedMs;
  }

  /** Returns tokens taken and not used (a reservation the write did not need). */
  giveBack(count: number): void {
    this.#fullAtMs -= count * this.#intervalMs;
  }

  /**
   * The server refused a request for its quota: nobody takes a token for `ms`, the bucket starts
   * empty after it (so the callers do not all come back at once), and its rate is halved.
   */
  pause(ms: number): void {
    const now = this.#now();
    const until = now + Math.max(0, ms);
    if (now >= this.#pausedUntilMs)
      this.#setRate(Math.max(this.ratePerSecond * MIN_RATE_SHARE, this.currentRate / 2));
    this.#pausedUntilMs = Math.max(this.#pausedUntilMs, until);
    this.#fullAtMs = Math.max(this.#fullAtMs, until + this.#burstMs);
  }

  /** The server took a request: the rate creeps back towards the stated one. */
  answered(): void {
    if (this.currentRate < this.ratePerSecond)
      this.#setRate(Math.min(this.ratePerSecond, this.currentRate + this.ratePerSecond * RECOVERY_SHARE));
  }

  #setRate(ratePerSecond: number): void {
    this.#intervalMs = 1000 / ratePerSecond;
    this.#burstMs = this.burst * this.#intervalMs;
  }

  #turn(count: number): { waitMs: number; fullAtMs: number } {
    const now = this.#now();
    const fullAtMs = Math.max(this.#fullAtMs, now) + count * this.#intervalMs;
    const allowedAt = Math.max(fullAtMs - this.#burstMs, this.#pausedUntilMs);
    return { waitMs: Math.max(0, Math.ceil(allowedAt - now)), fullAtMs };
  }
}
