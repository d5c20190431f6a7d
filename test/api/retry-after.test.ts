import { describe, expect, it } from 'vitest';
import { parseRetryAfter } from '../../src/api/retry-after.ts';

const NOW = Date.parse('2030-01-01T00:00:00Z');

describe('parseRetryAfter', () => {
  it('reads delay-seconds as milliseconds', () => {
    expect(parseRetryAfter('30', NOW)).toBe(30_000);
  });

  it('reads zero seconds as no wait', () => {
    expect(parseRetryAfter('0', NOW)).toBe(0);
  });

  it('reads an IMF-fixdate HTTP date as the time left until it', () => {
    expect(parseRetryAfter('Tue, 01 Jan 2030 00:00:45 GMT', NOW)).toBe(45_000);
  });

  it('reads the obsolete RFC 850 date form', () => {
    expect(parseRetryAfter('Tuesday, 01-Jan-30 00:01:00 GMT', NOW)).toBe(60_000);
  });

  it('treats a date in the past as no wait, never a negative one', () => {
    expect(parseRetryAfter('Mon, 31 Dec 2029 23:59:00 GMT', NOW)).toBe(0);
  });

  it('ignores surrounding whitespace', () => {
    expect(parseRetryAfter('  5 ', NOW)).toBe(5_000);
  });

  it.each([
    ['absent', undefined],
    ['empty', ''],
    ['fractional seconds', '1.5'],
    ['negative seconds', '-3'],
    ['garbage', 'soon'],
  ])('returns undefined for a header that is %s', (_name, header) => {
    expect(parseRetryAfter(header, NOW)).toBeUndefined();
  });
});
