// GitGuardian custom webhooks: header `Timestamp` and header `GitGuardian-Signature` =
// sha256=<hex HMAC-SHA256 of the raw body>, keyed with the timestamp text followed by the
// signature token (GitGuardian's documented scheme: "the key used is a string concatenation of
// the timestamp and the signature token"). GitGuardian advises dropping a request whose timestamp
// is "more than a few seconds" from the receiver's clock; keyroll allows MAX_SKEW_SECONDS.
import type { Secret } from '../../audit/public/secret.ts';
import { hmacSha256, sameBytes, sha256Header, sha256HeaderBytes } from '../../inbound/public/signature.ts';

export const GITGUARDIAN_SIGNATURE_HEADER = 'gitguardian-signature';
export const GITGUARDIAN_TIMESTAMP_HEADER = 'timestamp';
/** Either way: NTP-synced clocks plus GitGuardian's delivery latency, and no more. */
export const GITGUARDIAN_MAX_SKEW_SECONDS = 30;

export type GitguardianSignatureCheck =
  | { ok: true; timestamp: number; signature: string }
  | { ok: false; why: 'missing-signature' | 'malformed-signature' | 'stale-timestamp' | 'bad-signature' };

/** The header value GitGuardian would send (tests and docs). */
export function signGitguardianPayload(token: Secret, timestampText: string, body: Buffer | string): string {
  return sha256Header(gitguardianMac(token, timestampText, body));
}

function gitguardianMac(token: Secret, timestampText: string, body: Buffer | string): Buffer {
  return hmacSha256(`${timestampText}${token.reveal()}`, body);
}

export function checkGitguardianSignature(
  token: Secret,
  rawBody: Buffer,
  timestampHeader: string | undefined,
  signatureHeader: string | undefined,
  nowSeconds: number,
): GitguardianSignatureCheck {
  if (timestampHeader === undefined || signatureHeader === undefined)
    return { ok: false, why: 'missing-signature' };
  // Unix seconds, possibly with a fraction; the text itself is part of the HMAC key.
  if (!/^\d{9,12}(\.\d{1,9})?$/.test(timestampHeader)) return { ok: false, why: 'malformed-signature' };
  const given = sha256HeaderBytes(signatureHeader);
  if (given === undefined) return { ok: false, why: 'malformed-signature' };
  const timestamp = Math.floor(Number(timestampHeader));
  if (Math.abs(nowSeconds - timestamp) > GITGUARDIAN_MAX_SKEW_SECONDS)
    return { ok: false, why: 'stale-timestamp' };
  if (!sameBytes(given, gitguardianMac(token, timestampHeader, rawBody)))
    return { ok: false, why: 'bad-signature' };
  return { ok: true, timestamp, signature: given.toString('hex') };
}
