// The GitHub token's budget as its answers state it: the reconcile keeps a reserve for the webhook
// path and waits out every rate limit GitHub names (Retry-After, Remaining 0 until Reset, a
// secondary limit without either: a minute).
import { describe, expect, it } from 'vitest';
import { GithubRateBudget, MIN_RESERVE, SECONDARY_LIMIT_WAIT_MS } from '../../../src/leaks/github/rate.ts';

const T0 = Date.parse('2030-03-01T00:00:00Z');
const RESET_S = T0 / 1000 + 1800;

function budgetAt(now: { ms: number }): GithubRateBudget {
  return new GithubRateBudget(() => now.ms);
}

const headers = (remaining: number, extra: Record<string, string> = {}): Record<string, string> => ({
  'x-ratelimit-limit': '5000',
  'x-ratelimit-remaining': String(remaining),
  'x-ratelimit-reset': String(RESET_S),
  ...extra,
});

describe('GithubRateBudget', () => {
  it('lets the reconcile go before any answer, and while more than the reserve (10% of the limit) remains', () => {
    const budget = budgetAt({ ms: T0 });
    expect(budget.deferral()).toBeUndefined();
    budget.observe({ status: 200, headers: headers(502) });
    expect(budget.reserve()).toBe(500);
    expect(budget.deferral(2)).toBeUndefined();
    expect(budget.deferral(3)).toEqual({
      why: 'reserve',
      untilMs: RESET_S * 1000,
      remaining: 502,
      reserve: 500,
    });
  });

  it('keeps at least MIN_RESERVE for a small limit, and forgets the count once the window resets', () => {
    const now = { ms: T0 };
    const budget = budgetAt(now);
    budget.observe({ status: 200, headers: { ...headers(40), 'x-ratelimit-limit': '60' } });
    expect(budget.reserve()).toBe(MIN_RESERVE);
    expect(budget.deferral()?.why).toBe('reserve');
    now.ms = RESET_S * 1000;
    expect(budget.deferral()).toBeUndefined();
  });

  it('waits out Retry-After of a 429 or a 403, Reset of a 403 at Remaining 0, and a minute for a bare secondary limit', () => {
    const now = { ms: T0 };
    const retry = budgetAt(now);
    retry.observe({ status: 403, headers: headers(4000, { 'retry-after': '90' }) });
    expect(retry.deferral()).toEqual({ why: 'rate-limited', untilMs: T0 + 90_000 });

    const exhausted = budgetAt(now);
    exhausted.observe({ status: 403, headers: headers(0) });
    expect(exhausted.deferral()).toEqual({ why: 'rate-limited', untilMs: RESET_S * 1000 });

    const secondary = budgetAt(now);
    secondary.observe({ status: 429, headers: headers(4000) });
    expect(secondary.deferral()).toEqual({ why: 'rate-limited', untilMs: T0 + SECONDARY_LIMIT_WAIT_MS });
    now.ms = T0 + SECONDARY_LIMIT_WAIT_MS;
    expect(secondary.deferral()).toBeUndefined();
  });

  it('a 403 that names no limit (a token without the permission) is not a rate limit', () => {
    const budget = budgetAt({ ms: T0 });
    budget.observe({ status: 403, headers: headers(4000) });
    expect(budget.deferral()).toBeUndefined();
  });
});
