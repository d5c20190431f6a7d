// Trigger request signing: HMAC-SHA256 over "<timestamp>.<raw body>", checked in constant time
// after a ±300 s staleness check; accepted signatures are remembered (bounded) until they could
// no longer pass the staleness check anyway.
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Secret } from '../../src/audit/secret.ts';
import { checkTriggerSignature, MAX_CLOCK_SKEW_SECONDS, ReplayGuard, signTriggerRequest } from '../../src/scheduler/trigger-auth.ts';

const SECRET = new Secret('unit-test-trigger-secret');
const NOW = 1_900_000_000;
const BODY = '{"keys":["k1"],"reason":"leak","actor":"alice"}';

function check(timestamp: string | undefined, signature: string | undefined, body = BODY, now = NOW): ReturnType<typeof checkTriggerSignature> {
  return checkTriggerSignature({ timestampHeader: timestamp, signatureHeader: signature, rawBody: Buffer.from(body) }, SECRET, now);
}

describe('checkTriggerSignature', () => {
  it('accepts what openssl would compute: hex HMAC-SHA256 of "<timestamp>.<body>"', () => {
    const hex = createHmac('sha256', 'unit-test-trigger-secret').update(`${NOW}.${BODY}`).digest('hex');
    expect(signTriggerRequest(SECRET, NOW, BODY)).toBe(`sha256=${hex}`);
    expect(check(String(NOW), `sha256=${hex.toUpperCase()}`)).toEqual({ ok: true, timestamp: NOW, digest: hex });
  });

  it('refuses a signature over another body, timestamp or secret', () => {
    expect(check(String(NOW), signTriggerRequest(SECRET, NOW, `${BODY} `))).toEqual({ ok: false, why: 'bad-signature' });
    expect(check(String(NOW), signTriggerRequest(SECRET, NOW - 1, BODY))).toEqual({ ok: false, why: 'bad-signature' });
    expect(check(String(NOW), signTriggerRequest(new Secret('another-secret-value'), NOW, BODY))).toEqual({ ok: false, why: 'bad-signature' });
  });

  it('refuses timestamps more than 300 s away, in the past or the future, before computing anything', () => {
    for (const timestamp of [NOW - MAX_CLOCK_SKEW_SECONDS - 1, NOW + MAX_CLOCK_SKEW_SECONDS + 1]) {
      expect(check(String(timestamp), signTriggerRequest(SECRET, timestamp, BODY))).toEqual({ ok: false, why: 'stale-timestamp' });
    }
    for (const timestamp of [NOW - MAX_CLOCK_SKEW_SECONDS, NOW + MAX_CLOCK_SKEW_SECONDS]) {
      expect(check(String(timestamp), signTriggerRequest(SECRET, timestamp, BODY))).toMatchObject({ ok: true });
    }
  });

  it('tells missing headers from malformed ones', () => {
    const good = signTriggerRequest(SECRET, NOW, BODY);
    expect(check(undefined, good)).toEqual({ ok: false, why: 'missing-signature' });
    expect(check(String(NOW), undefined)).toEqual({ ok: false, why: 'missing-signature' });
    expect(check('1.5e9', good)).toEqual({ ok: false, why: 'malformed-signature' });
    expect(check(String(NOW), good.replace('sha256=', 'sha1='))).toEqual({ ok: false, why: 'malformed-signature' });
    expect(check(String(NOW), good.slice(0, -2))).toEqual({ ok: false, why: 'malformed-signature' });
    expect(checkTriggerSignature({ timestampHeader: [String(NOW), String(NOW)], signatureHeader: good, rawBody: Buffer.from(BODY) }, SECRET, NOW)).toEqual({ ok: false, why: 'missing-signature' });
  });
});

describe('ReplayGuard', () => {
  it('reports a digest seen before as a replay', () => {
    const guard = new ReplayGuard();
    expect(guard.checkAndRecord('d1', NOW, NOW)).toBe(false);
    expect(guard.checkAndRecord('d1', NOW, NOW + 10)).toBe(true);
    expect(guard.checkAndRecord('d2', NOW, NOW + 10)).toBe(false);
  });

  it('forgets a digest once its timestamp is past the skew window (the staleness check refuses it from then on)', () => {
    const guard = new ReplayGuard();
    guard.checkAndRecord('d1', NOW, NOW);
    guard.checkAndRecord('d2', NOW + 200, NOW + 200);
    expect(guard.checkAndRecord('d3', NOW + 301, NOW + MAX_CLOCK_SKEW_SECONDS + 1)).toBe(false);
    expect(guard.size).toBe(2);
  });

  it('keeps at most maxEntries, forgetting the oldest', () => {
    const guard = new ReplayGuard(3);
    for (const digest of ['a', 'b', 'c', 'd']) guard.checkAndRecord(digest, NOW, NOW);
    expect(guard.size).toBe(3);
    expect(guard.checkAndRecord('d', NOW, NOW)).toBe(true);
    expect(guard.checkAndRecord('a', NOW, NOW)).toBe(false);
  });
});
