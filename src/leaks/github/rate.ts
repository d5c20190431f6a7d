// The GitHub token's request budget as its answers state it. Every answer, the webhook path's
// included, reports X-RateLimit-Remaining / -Limit / -Reset (epoch seconds); a 429, or a 403 that
// carries Retry-After or Remaining 0, is a rate limit (primary or secondary) to wait out. The
// webhook path never asks the budget: a leak reported now is always fetched. The reconcile asks
// before each request and leaves a reserve, so however many alerts it lists it never spends what
// the webhook path needs (GitHub, "Best practices for using the REST API": honour Retry-After;
// at Remaining 0 wait for Reset; a secondary limit without either, wait at least a minute).
import { parseRetryAfter } from '../../api/public/retry-after.ts';
import type { GithubAnswerMeta } from './client.ts';

/** A secondary rate limit that names no wait: GitHub asks for at least a minute. */
export const SECONDARY_LIMIT_WAIT_MS = 60_000;
/** The share of the hourly limit the reconcile never spends (the webhook path's). */
export const RESERVE_SHARE = 0.1;
/** ... and at least this many requests: a small limit still leaves the webhook path a few alerts. */
export const MIN_RESERVE = 50;

export type RateDeferral =
  | { why: 'reserve'; untilMs: number; remaining: number; reserve: number }
  | { why: 'rate-limited'; untilMs: number };

export class GithubRateBudget {
  #remaining: number | undefined;
  #limit: number | undefined;
  #resetAtMs: number | undefined;
  #pausedUntilMs: number | undefined;
  readonly #nowMs: () => number;

  constructor(nowMs: () => number) {
    this.#nowMs = nowMs;
  }

  /** Requests left, as the last answer said (undefined before any answer). */
  get remaining(): number | undefined {
    return this.#remaining;
  }

  /** Reads one answer's rate headers. */
  observe(answer: GithubAnswerMeta): void {
    const now = this.#nowMs();
    const remaining = numberHeader(answer.headers['x-ratelimit-remaining']);
    const limit = numberHeader(answer.headers['x-ratelimit-limit']);
    const reset = numberHeader(answer.headers['x-ratelimit-reset']);
    if (remaining !== undefined) this.#remaining = remaining;
    if (limit !== undefined) this.#limit = limit;
    if (reset !== undefined) this.#resetAtMs = reset * 1000;
    const retryAfter = parseRetryAfter(single(answer.headers['retry-after']), now);
    const limited =
      answer.status === 429 || (answer.status === 403 && (retryAfter !== undefined || remaining === 0));
    if (!limited) return;
    const until =
      retryAfter !== undefined
        ? now + retryAfter
        : remaining === 0 && this.#resetAtMs !== undefined
          ? this.#resetAtMs
          : now + SECONDARY_LIMIT_WAIT_MS;
    this.#pausedUntilMs = Math.max(this.#pausedUntilMs ?? 0, until);
  }

  /** The requests the reconcile leaves to the webhook path. */
  reserve(): number {
    return Math.max(MIN_RESERVE, Math.ceil((this.#limit ?? 0) * RESERVE_SHARE));
  }

  /**
   * Undefined when the reconcile may spend `cost` more requests now; else why not and until when.
   * Past the reset time the remaining count is unknown again (a new window), so it may go.
   */
  deferral(cost = 1): RateDeferral | undefined {
    const now = this.#nowMs();
    if (this.#pausedUntilMs !== undefined && now < this.#pausedUntilMs)
      return { why: 'rate-limited', untilMs: this.#pausedUntilMs };
    if (this.#remaining === undefined) return undefined;
    if (this.#resetAtMs !== undefined && now >= this.#resetAtMs) return undefined;
    const reserve = this.reserve();
    if (this.#remaining - cost >= reserve) return undefined;
    return {
      why: 'reserve',
      untilMs: this.#resetAtMs ?? now + SECONDARY_LIMIT_WAIT_MS,
      remaining: this.#remaining,
      reserve,
    };
  }
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

function numberHeader(value: string | string[] | undefined): number | undefined {
  const text = single(value);
  if (text === undefined || !/^\d+$/.test(text.trim())) return undefined;
  return Number(text.trim());
}
