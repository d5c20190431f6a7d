// The sanitizer with many secrets registered, as after a 1,000-key emergency rotation: every one
// is still blanked in all its forms, lines without a secret come back unchanged, and an evicted
// secret leaves the others that share its first characters blanked.
import { afterEach, describe, expect, it } from 'vitest';
import { registerSecretValue, resetSanitizerForTests, sanitizeText } from '../../src/audit/sanitize.ts';

const secretNumber = (n: number): string => `kmk_live_${String(n).padStart(6, '0')}_${'x'.repeat(24)}`;

afterEach(() => {
  resetSanitizerForTests();
});

describe('sanitizer with thousands of registered secrets', () => {
  it('blanks any one of them, raw or base64, wherever it sits in a line', () => {
    for (let n = 0; n < 2_000; n++) registerSecretValue(secretNumber(n));
    const raw = secretNumber(1_234);
    const base64 = Buffer.from(secretNumber(77)).toString('base64');
    expect(sanitizeText(`a ${raw} b`)).toBe('a [REDACTED] b');
    expect(sanitizeText(`{"echo":"${base64}"}`)).toBe('{"echo":"[REDACTED]"}');
  });

  it('returns a line holding no secret unchanged, even one sharing their common start', () => {
    for (let n = 0; n < 2_000; n++) registerSecretValue(secretNumber(n));
    const line =
      '{"event":"key.stored","keyId":"key_leak_0042","fingerprint":"sha256:1f2e3d4c","note":"kmk_live_ is the prefix"}';
    expect(sanitizeText(line)).toBe(line);
  });

  it('keeps blanking the younger secrets after the oldest ones were evicted', () => {
    // 4096 are tracked; the first registered are evicted first.
    for (let n = 0; n < 5_000; n++) registerSecretValue(secretNumber(n));
    expect(sanitizeText(secretNumber(4_999))).toBe('[REDACTED]');
    expect(sanitizeText(secretNumber(904))).toBe('[REDACTED]');
    expect(sanitizeText(secretNumber(0))).toBe(secretNumber(0));
  });
});
