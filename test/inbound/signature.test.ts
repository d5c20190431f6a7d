// The pieces every signed endpoint's check is made of: the `sha256=<hex>` header, HMAC-SHA256
// over parts in order, and a comparison that tells equal bytes from any difference.
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { hmacSha256, sameBytes, sha256Header, sha256HeaderBytes } from '../../src/inbound/signature.ts';

const KEY = 'inbound-signature-test-key-0123456789abcdef';

describe('hmacSha256', () => {
  it('is the HMAC of the parts joined, as openssl computes it over the whole', () => {
    const whole = createHmac('sha256', KEY).update('1900000000.nonce.{"a":1}').digest();
    expect(hmacSha256(KEY, '1900000000.nonce.', Buffer.from('{"a":1}'))).toEqual(whole);
    expect(sha256Header(whole)).toBe(`sha256=${whole.toString('hex')}`);
  });
});

describe('sha256HeaderBytes', () => {
  it('reads sha256= and 64 hex digits in either case, around whitespace; anything else is not a signature', () => {
    const mac = hmacSha256(KEY, 'body');
    expect(sha256HeaderBytes(` ${sha256Header(mac)} `)).toEqual(mac);
    expect(sha256HeaderBytes(`sha256=${mac.toString('hex').toUpperCase()}`)).toEqual(mac);
    for (const header of [
      '',
      'sha256=',
      `sha1=${mac.toString('hex')}`,
      `sha256=${mac.toString('hex').slice(1)}`,
      `sha256=${mac.toString('hex')}00`,
      `sha256=${'g'.repeat(64)}`,
    ]) {
      expect(sha256HeaderBytes(header), header).toBeUndefined();
    }
  });
});

describe('sameBytes', () => {
  it('is true only for the same bytes; a different length is false, not an exception', () => {
    const mac = hmacSha256(KEY, 'body');
    expect(sameBytes(mac, Buffer.from(mac))).toBe(true);
    const flipped = Buffer.from(mac);
    flipped[31] = (flipped[31] ?? 0) ^ 1;
    expect(sameBytes(flipped, mac)).toBe(false);
    expect(sameBytes(mac.subarray(0, 16), mac)).toBe(false);
  });
});
