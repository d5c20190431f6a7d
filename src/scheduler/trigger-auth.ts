// Authentication of the trigger endpoint: an HMAC-SHA256 with the caller's own key over
// "<timestamp>.<nonce>.<raw body>", in the manner of Stripe and Slack request signing.
//   X-Keyroll-Caller:    alice                      (names the key: one key per caller)
//   X-Keyroll-Timestamp: 1767225600                 (unix seconds)
//   X-Keyroll-Nonce:     6f1c0e...                  (16-64 of [A-Za-z0-9_-], fresh per request)
//   X-Keyroll-Signature: sha256=<64 hex digits>
// The timestamp bounds how long a captured request stays usable (5 minutes either way); the
// caller and nonce identify the request in the durable replay record (inbound/replay-record.ts), so a
// captured request is refused even after a daemon restart. The body is signed as received, byte
// for byte, so no JSON re-encoding can make two parties disagree. The caller that signed is the
// actor: what the body says cannot change who asked.
import type { Secret } from '../audit/public/secret.ts';
import { singleHeader } from '../inbound/public/answers.ts';
import { hmacSha256, sameBytes, sha256Header, sha256HeaderBytes } from '../inbound/public/signature.ts';

export const CALLER_HEADER = 'x-keyroll-caller';
export const TIMESTAMP_HEADER = 'x-keyroll-timestamp';
export const NONCE_HEADER = 'x-keyroll-nonce';
export const SIGNATURE_HEADER = 'x-keyroll-signature';
/** How far a request's timestamp may be from the daemon's clock, either way. */
export const MAX_CLOCK_SKEW_SECONDS = 300;
/** Caller names: what the audit's `actor` shows, and a --trigger-key NAME. */
export const CALLER_NAME = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$/;
const NONCE = /^[A-Za-z0-9_-]{16,64}$/;

export type SignatureProblem =
  'missing-signature' | 'malformed-signature' | 'stale-timestamp' | 'bad-signature';

export type SignatureCheck =
  { ok: true; caller: string; timestamp: number; nonce: string } | { ok: false; why: SignatureProblem };

/** The trigger keys by caller name; undefined for a caller the daemon does not know. */
export type TriggerKeyLookup = (caller: string) => Secret | undefined;

/** The signature header value for `body` sent at `timestamp` with `nonce` (tests, docs and callers in TypeScript). */
export function signTriggerRequest(
  secret: Secret,
  timestamp: number,
  nonce: string,
  body: string | Buffer,
): string {
  return sha256Header(triggerMac(secret.reveal(), timestamp, nonce, body));
}

function triggerMac(key: string, timestamp: number, nonce: string, body: string | Buffer): Buffer {
  // The HMAC key is the one place a trigger key's value is used.
  return hmacSha256(key, `${timestamp}.${nonce}.`, body);
}

export interface SignedRequest {
  callerHeader: string | string[] | undefined;
  timestampHeader: string | string[] | undefined;
  nonceHeader: string | string[] | undefined;
  signatureHeader: string | string[] | undefined;
  rawBody: Buffer;
}

/** Stands in for an unknown caller's key, so an unknown name costs the same HMAC as a known one. */
const UNKNOWN_CALLER_KEY = 'keyroll-unknown-caller';

/**
 * Checks the headers' shape, the timestamp, then the caller's signature in constant time. The
 * staleness check comes first and needs no secret work, but every answer is 401: a caller learns
 * nothing it could not see in its own clock. An unknown caller is a bad signature (its name is
 * not confirmed or denied).
 */
export function checkTriggerSignature(
  request: SignedRequest,
  keyOf: TriggerKeyLookup,
  nowSeconds: number,
): SignatureCheck {
  const caller = singleHeader(request.callerHeader);
  const timestampText = singleHeader(request.timestampHeader);
  const nonce = singleHeader(request.nonceHeader);
  const signatureText = singleHeader(request.signatureHeader);
  if (
    caller === undefined ||
    timestampText === undefined ||
    nonce === undefined ||
    signatureText === undefined
  )
    return { ok: false, why: 'missing-signature' };
  if (!CALLER_NAME.test(caller) || !NONCE.test(nonce) || !/^\d{1,12}$/.test(timestampText))
    return { ok: false, why: 'malformed-signature' };
  const given = sha256HeaderBytes(signatureText);
  if (given === undefined) return { ok: false, why: 'malformed-signature' };
  const timestamp = Number(timestampText);
  if (Math.abs(nowSeconds - timestamp) > MAX_CLOCK_SKEW_SECONDS) return { ok: false, why: 'stale-timestamp' };
  const key = keyOf(caller);
  const matches = sameBytes(
    given,
    triggerMac(key?.reveal() ?? UNKNOWN_CALLER_KEY, timestamp, nonce, request.rawBody),
  );
  if (key === undefined || !matches) return { ok: false, why: 'bad-signature' };
  return { ok: true, caller, timestamp, nonce };
}
