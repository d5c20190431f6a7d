// The schedule `keyroll aws enable-rotation` gives Secrets Manager (src/lambda/schedule.ts):
// derived from maxAge, never shorter than AWS's 4-hour minimum, minInterval or consumerRefresh.
import { describe, expect, it } from 'vitest';
import { rotationRulesFor } from '../../src/lambda/schedule.ts';
import { keyPolicy } from '../rotation/harness.ts';

const HOUR = 3600_000;

describe('rotationRulesFor', () => {
  it('whole days become AutomaticallyAfterDays (what AWS Config compares against)', () => {
    expect(rotationRulesFor(keyPolicy('k', 'o', { maxAgeMs: 30 * 24 * HOUR }))).toEqual({
      AutomaticallyAfterDays: 30,
    });
  });

  it('other lengths become rate(N hours), rounded down so AWS rotates no later than maxAge', () => {
    expect(rotationRulesFor(keyPolicy('k', 'o', { maxAgeMs: 36.5 * HOUR }))).toEqual({
      ScheduleExpression: 'rate(36 hours)',
    });
  });

  it('refuses less than AWS minimum of 4 hours, and less than minInterval or consumerRefresh', () => {
    expect(() => rotationRulesFor(keyPolicy('k', 'o', { maxAgeMs: 3 * HOUR, minIntervalMs: HOUR }))).toThrow(
      /AWS's 4h minimum/,
    );
    expect(() =>
      rotationRulesFor(
        keyPolicy('k', 'o', { maxAgeMs: 5 * HOUR, minIntervalMs: HOUR, consumerRefreshMs: 6 * HOUR }),
      ),
    ).toThrow(/shorter than 6h/);
  });

  it('refuses a key without maxAge: a croner schedule is not translated to AWS cron', () => {
    const key = keyPolicy('k', 'o', { schedule: '0 3 * * 1' });
    delete key.maxAgeMs;
    expect(() => rotationRulesFor(key)).toThrow(/has no maxAge/);
  });
});
