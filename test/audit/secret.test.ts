import { inspect } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { resetSanitizerForTests, sanitizeText } from '../../src/audit/sanitize.ts';
import { Secret, sha256Hex } from '../../src/audit/secret.ts';

afterEach(() => {
  resetSanitizerForTests();
});

const VALUE = 'sk_live_never_print_me_0123456789';

describe('Secret', () => {
  it('shows [Secret] through String(), template literals and concatenation', () => {
    const secret = new Secret(VALUE);

    expect(String(secret)).toBe('[Secret]');
    // The lint rule forbids objects in templates; this test exercises exactly that coercion.
    // eslint-disable-next-line @typescript-eslint/restrict-template-expressions
    expect(`value=${secret}`).toBe('value=[Secret]');
    // eslint-disable-next-line @typescript-eslint/restrict-plus-operands
    expect('value=' + secret).toBe('value=[Secret]');
  });

  it('shows [Secret] through JSON.stringify, nested too', () => {
    const secret = new Secret(VALUE);

    expect(JSON.stringify({ apiKey: secret, list: [secret] })).toBe(
      '{"apiKey":"[Secret]","list":["[Secret]"]}',
    );
  });

  it('shows [Secret] through util.inspect, nested too', () => {
    const secret = new Secret(VALUE);

    expect(inspect(secret)).toBe('[Secret]');
    expect(inspect({ deep: { secret } }, { depth: 5 })).not.toContain(VALUE);
  });

  it('gives the value only through reveal()', () => {
    expect(new Secret(VALUE).reveal()).toBe(VALUE);
  });

  it('has a stable 12-hex fingerprint: the SHA-256 prefix', () => {
    const fingerprint = new Secret(VALUE).fingerprint();

    expect(fingerprint).toMatch(/^[0-9a-f]{12}$/);
    expect(fingerprint).toBe(sha256Hex(VALUE).slice(0, 12));
    expect(new Secret(VALUE).fingerprint()).toBe(fingerprint);
    expect(new Secret(`${VALUE}x`).fingerprint()).not.toBe(fingerprint);
  });

  it('matches the known SHA-256 of a fixed value', () => {
    expect(new Secret('keyroll-fingerprint-fixture').digest()).toBe(sha256Hex('keyroll-fingerprint-fixture'));
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('registers its value with the sanitizer on construction', () => {
    new Secret(VALUE);

    expect(sanitizeText(`oops ${VALUE}`)).toBe('oops [REDACTED]');
  });

  it('compares by value without revealing', () => {
    expect(new Secret(VALUE).equals(new Secret(VALUE))).toBe(true);
    expect(new Secret(VALUE).equals(new Secret(`${VALUE}!`))).toBe(false);
  });
});
