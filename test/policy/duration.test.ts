import { describe, expect, it } from 'vitest';
import { durationProblem, formatDuration, parseDuration } from '../../src/policy/duration.ts';

describe('parseDuration', () => {
  it.each([
    ['200ms', 200],
    ['90s', 90_000],
    ['15m', 900_000],
    ['1h', 3_600_000],
    ['7d', 604_800_000],
    ['2w', 1_209_600_000],
    ['1h30m', 5_400_000],
    ['1m5s', 65_000],
  ])('%s is %d ms', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it.each(['', '30', '7 days', '1.5h', '-1h', 'h', '1y', '15M', ' 15m'])('refuses %j', (text) => {
    expect(() => parseDuration(text)).toThrow(
      expect.objectContaining({ code: 'KR_DURATION_INVALID' }) as Error,
    );
  });

  it('refuses zero and lengths beyond a safe integer', () => {
    expect(durationProblem('0s')).toBe('"0s" is zero; a duration must be longer than that');
    expect(durationProblem('99999999999999999w')).toBe('"99999999999999999w" is too long');
  });
});

describe('formatDuration', () => {
  it.each([
    [5_400_000, '1h30m'],
    [604_800_000, '1w'],
    [200, '200ms'],
    [0, '0s'],
  ])('%d ms is %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('round-trips through parseDuration', () => {
    for (const ms of [1, 999, 61_000, 90_061_001, 1_209_600_000])
      expect(parseDuration(formatDuration(ms))).toBe(ms);
  });
});
