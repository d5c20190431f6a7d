// Trigger request signing: HMAC-SHA256 with the caller's own key over
// "<timestamp>.<nonce>.<raw body>", checked in constant time after a ±300 s staleness check.
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Secret } from '../../src/audit/secret.ts';
import {
  checkTriggerSignature,
  MAX_CLOCK_SKEW_SECONDS,
  signTriggerRequest,
  type SignedRequest,
} from '../../src/scheduler/trigger-auth.ts';

const ALICE = 'unit-test-trigger-key-of-alice-0123456789';
const BOB = 'unit-test-trigger-key-of-bob-9876543210xyz';
const KEYS = new Map([
  ['alice', new Secret(ALICE)],
  ['bob', new Secret(BOB)],
]);
const NOW = 1_900_000_000;
const NONCE = '0123456789abcdef0123456789abcdef';
const BODY = '{"keys":["k1"],"reason":"leak"}';

function request(overrides: Partial<SignedRequest> = {}): SignedRequest {
  return {
    callerHeader: 'alice',
    timestampHeader: String(NOW),
    nonceHeader: NONCE,
    signatureHeader: signTriggerRequest(new Secret(ALICE), NOW, NONCE, BODY),
    rawBody: Buffer.from(BODY),
    ...overrides,
  };
}

const check = (overrides: Partial<SignedRequest> = {}, now = NOW): ReturnType<typeof checkTriggerSignature> =>
  checkTriggerSignature(request(overrides), (caller) => KEYS.get(caller), now);

describe('checkTriggerSignature', () => {
  it('accepts what openssl would compute: hex HMAC-SHA256 of "<timestamp>.<nonce>.<body>" with the caller\'s key', () => {
    const hex = createHmac('sha256', ALICE).update(`${NOW}.${NONCE}.${BODY}`).digest('hex');
    expect(signTriggerRequest(new Secret(ALICE), NOW, NONCE, BODY)).toBe(`sha256=${hex}`);
    expect(check({ signatureHeader: `sha256=${hex.toUpperCase()}` })).toEqual({
      ok: true,
      caller: 'alice',
      timestamp: NOW,
      nonce: NONCE,
    });
  });

  it("names the caller whose key verified, and refuses a signature made with another caller's key", () => {
    const byBob = signTriggerRequest(new Secret(BOB), NOW, NONCE, BODY);
    expect(check({ callerHeader: 'bob', signatureHeader: byBob })).toMatchObject({ ok: true, caller: 'bob' });
    // bob's key cannot speak for alice, nor alice's for bob.
    expect(check({ callerHeader: 'alice', signatureHeader: byBob })).toEqual({
      ok: false,
      why: 'bad-signature',
    });
    expect(check({ callerHeader: 'bob' })).toEqual({ ok: false, why: 'bad-signature' });
  });

  it('refuses an unknown caller as a bad signature (its existence is not confirmed)', () => {
    expect(check({ callerHeader: 'mallory' })).toEqual({ ok: false, why: 'bad-signature' });
  });

  it('refuses a signature over another body, timestamp, nonce or key', () => {
    expect(check({ signatureHeader: signTriggerRequest(new Secret(ALICE), NOW, NONCE, `${BODY} `) })).toEqual(
      { ok: false, why: 'bad-signature' },
    );
    expect(check({ signatureHeader: signTriggerRequest(new Secret(ALICE), NOW - 1, NONCE, BODY) })).toEqual({
      ok: false,
      why: 'bad-signature',
    });
    expect(check({ nonceHeader: `${NONCE}0` })).toEqual({ ok: false, why: 'bad-signature' });
    expect(
      check({
        signatureHeader: signTriggerRequest(
          new Secret('another-key-value-of-32-bytes-or-more'),
          NOW,
          NONCE,
          BODY,
        ),
      }),
    ).toEqual({ ok: false, why: 'bad-signature' });
  });

  it('refuses timestamps more than 300 s away, in the past or the future', () => {
    for (const timestamp of [NOW - MAX_CLOCK_SKEW_SECONDS - 1, NOW + MAX_CLOCK_SKEW_SECONDS + 1]) {
      expect(
        check({
          timestampHeader: String(timestamp),
          signatureHeader: signTriggerRequest(new Secret(ALICE), timestamp, NONCE, BODY),
        }),
      ).toEqual({ ok: false, why: 'stale-timestamp' });
    }
    for (const timestamp of [NOW - MAX_CLOCK_SKEW_SECONDS, NOW + MAX_CLOCK_SKEW_SECONDS]) {
      expect(
        check({
          timestampHeader: String(timestamp),
          signatureHeader: signTriggerRequest(new Secret(ALICE), timestamp, NONCE, BODY),
        }),
      ).toMatchObject({ ok: true });
    }
  });

  it('tells missing headers from malformed ones', () => {
    for (const header of ['callerHeader', 'timestampHeader', 'nonceHeader', 'signatureHeader'] as const) {
      expect(check({ [header]: undefined }), header).toEqual({ ok: false, why: 'missing-signature' });
    }
    expect(check({ timestampHeader: [String(NOW), String(NOW)] })).toEqual({
      ok: false,
      why: 'missing-signature',
    });
    expect(check({ timestampHeader: '1.5e9' })).toEqual({ ok: false, why: 'malformed-signature' });
    expect(check({ nonceHeader: 'short' })).toEqual({ ok: false, why: 'malformed-signature' });
    expect(check({ nonceHeader: `${NONCE}/..` })).toEqual({ ok: false, why: 'malformed-signature' });
    expect(check({ callerHeader: 'alice smith' })).toEqual({ ok: false, why: 'malformed-signature' });
    const good = request().signatureHeader as string;
    expect(check({ signatureHeader: good.replace('sha256=', 'sha1=') })).toEqual({
      ok: false,
      why: 'malformed-signature',
    });
    expect(check({ signatureHeader: good.slice(0, -2) })).toEqual({ ok: false, why: 'malformed-signature' });
  });
});
