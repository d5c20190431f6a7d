// Authentication of the trigger endpoint: an HMAC-SHA256 over "<timestamp>.<raw body>" with a
// shared secret, in the manner of Stripe and Slack request signing.
//   X-Keyroll-Timestamp: 1767225600               (unix seconds)
//   X-Keyroll-Signature: sha256=<64 hex digits>
// The timestamp bounds how long a captured request stays usable (5 minutes either way); within
// that window each signature is accepted once (replays get 409). The body is signed as received,
// byte for byte, so no JSON re-encoding can make two parties disagree.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Secret } from '../audit/secret.ts';

export const TIMESTAMP_HEADER = 'x-keyroll-timestamp';
export const SIGNATURE_HEADER = 'x-keyroll-signature';
/** How far a request's timestamp may be from the daemon's clock, either way. */
export const MAX_CLOCK_SKEW_SECONDS = 300;

export type SignatureProblem = 'missing-signature' | 'malformed-signature' | 'stale-timestamp' | 'bad-signature';

export type SignatureCheck = { ok: true; timestamp: number; digest: string } | { ok: false; why: SignatureProblem };

/** The signature header value for `body` sent at `timestamp` (tests, docs and callers in TypeScript). */
export function signTriggerRequest(secret: Secret, timestamp: number, body: string | Buffer): string {
  return `sha256=${hmacHex(secret, timestamp, typeof body === 'string' ? Buffer.from(body, 'utf8') : body)}`;
}

function hmacHex(secret: Secret, timestamp: number, body: Buffer): string {
  // The HMAC key is the one place the trigger secret's value is used.
  return createHmac('sha256', secret.reveal()).update(`${timestamp}.`, 'utf8').update(body).digest('hex');
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? (value.length === 1 ? value[0] : undefined) : value;
}

export interface SignedRequest {
  timestampHeader: string | string[] | undefined;
  signatureHeader: string | string[] | undefined;
  rawBody: Buffer;
}

/**
 * Checks the timestamp, then the signature in constant time. The staleness check comes first and
 * needs no secret work, but both answers are 401: a caller learns nothing it could not see in
 * its own clock.
 */
export function checkTriggerSignature(request: SignedRequest, secret: Secret, nowSeconds: number): SignatureCheck {
  const timestampText = single(request.timestampHeader);
  const signatureText = single(request.signatureHeader);
  if (timestampText === undefined || signatureText === undefined) return { ok: false, why: 'missing-signature' };
  if (!/^\d{1,12}$/.test(timestampText)) return { ok: false, why: 'malformed-signature' };
  const match = /^sha256=([0-9a-fA-F]{64})$/.exec(signatureText.trim());
  if (!match?.[1]) return { ok: false, why: 'malformed-signature' };
  const timestamp = Number(timestampText);
  if (Math.abs(nowSeconds - timestamp) > MAX_CLOCK_SKEW_SECONDS) return { ok: false, why: 'stale-timestamp' };
  const expected = Buffer.from(hmacHex(secret, timestamp, request.rawBody), 'hex');
  const given = Buffer.from(match[1], 'hex');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { ok: false, why: 'bad-signature' };
  return { ok: true, timestamp, digest: match[1].toLowerCase() };
}

/**
 * Remembers accepted signatures until their timestamp leaves the skew window (after that the
 * staleness check refuses them anyway). Bounded: past `maxEntries` live entries the oldest is
 * forgotten. Only correctly signed requests are recorded, so only a holder of the secret can
 * fill it; the bound keeps even that from growing the daemon without limit.
 */
export class ReplayGuard {
  readonly #seen = new Map<string, number>();
  readonly #maxEntries: number;

  constructor(maxEntries = 10_000) {
    this.#maxEntries = maxEntries;
  }

  /** True when `digest` was accepted before (a replay); otherwise records it and returns false. */
  checkAndRecord(digest: string, timestamp: number, nowSeconds: number): boolean {
    this.#forgetExpired(nowSeconds);
    if (this.#seen.has(digest)) return true;
    this.#seen.set(digest, timestamp + MAX_CLOCK_SKEW_SECONDS);
    while (this.#seen.size > this.#maxEntries) {
      const oldest = this.#seen.keys().next();
      if (oldest.done === true) break;
      this.#seen.delete(oldest.value);
    }
    return false;
  }

  get size(): number {
    return this.#seen.size;
  }

  #forgetExpired(nowSeconds: number): void {
    for (const [digest, expiresAt] of this.#seen) {
      if (expiresAt < nowSeconds) this.#seen.delete(digest);
    }
  }
}
