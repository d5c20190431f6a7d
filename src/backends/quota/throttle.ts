// Waiting out a backend's throttle answers (invariant 11: a quota is a budget, not a failure).
// AWS answers a request over its account's quota with ThrottlingException, Vault/OpenBao with 429
// when a rate-limit quota is configured. Neither is a failure of the request: it is waited out
// (a jittered backoff, or the server's Retry-After when that is longer) and sent again, within
// the call's budget, and every such answer is counted. Only a call that is still refused when its
// budget is spent fails, with the backend's throttle code.
import { setTimeout as delay } from 'node:timers/promises';

/** What a throttle answer says about waiting; undefined for an error that is not one. */
export interface ThrottleAnswer {
  retryAfterMs?: number | undefined;
}

/** One throttle answer (for the metric and the debug audit line), waited out or the last one. */
export interface ThrottleWait {
  /** Answers refused so far for this call, this one included. */
  attempt: number;
  /** The wait before the call is sent again; 0 when it is not (`gaveUp`, or not this loop's to wait). */
  waitMs: number;
  retryAfterMs?: number;
  /** The call's budget does not cover the wait: this answer is its last, and the call fails. */
  gaveUp?: boolean;
}

export interface ThrottleRetryOptions {
  /** The longest this call may wait in all, pacing and throttle answers together. */
  maxWaitMs: number;
  throttleOf(error: unknown): ThrottleAnswer | undefined;
  onThrottled?(wait: ThrottleWait): void;
  /** Slows every caller of the same quota (the shared bucket), not only this one. */
  pause?(ms: number): void;
  nowMs?: () => number;
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
}

/** Without a Retry-After: 250 ms, doubling to 8 s, half of it jittered (many keys meet the same quota). */
export const THROTTLE_BACKOFF = { initialMs: 250, maxMs: 8_000 } as const;

export function throttleBackoffMs(attempt: number, random: () => number = Math.random): number {
  const ceiling = Math.min(
    THROTTLE_BACKOFF.maxMs,
    THROTTLE_BACKOFF.initialMs * 2 ** Math.max(0, attempt - 1),
  );
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/**
 * Runs `call` (given the budget it has left) until it is not refused for a quota. A throttle answer
 * is waited out and the call sent again while the budget lasts; any other error, and the last
 * throttle answer once the budget is spent, is thrown as it came.
 */
export async function retryThrottled<T>(
  call: (remainingMs: number) => Promise<T>,
  options: ThrottleRetryOptions,
): Promise<T> {
  const now = options.nowMs ?? Date.now;
  const sleep = options.sleep ?? ((ms: number) => delay(ms));
  const startedMs = now();
  for (let attempt = 1; ; attempt++) {
    try {
      return await call(Math.max(0, options.maxWaitMs - (now() - startedMs)));
    } catch (error) {
      const answer = options.throttleOf(error);
      if (answer === undefined) throw error;
      // At least the backoff: a Retry-After in whole seconds reads 0 within the last second
      // (OpenBao sends exactly that), and waiting 0 would only hammer the quota.
      const waitMs = Math.max(answer.retryAfterMs ?? 0, throttleBackoffMs(attempt, options.random));
      const retryAfter = answer.retryAfterMs === undefined ? {} : { retryAfterMs: answer.retryAfterMs };
      options.pause?.(waitMs);
      if (now() - startedMs + waitMs > options.maxWaitMs) {
        options.onThrottled?.({ attempt, waitMs: 0, ...retryAfter, gaveUp: true });
        throw error;
      }
      options.onThrottled?.({ attempt, waitMs, ...retryAfter });
      await sleep(waitMs);
    }
  }
}
