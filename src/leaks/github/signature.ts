// GitHub signs each delivery with the webhook secret: X-Hub-Signature-256 = sha256=<hex
// HMAC-SHA256 of the raw body>, checked in constant time before a byte of the body is parsed.
// GitHub signs no timestamp and nothing but the body (X-GitHub-Delivery and X-GitHub-Event are
// not covered), so a captured delivery stays valid under any delivery id: the endpoint knows a
// delivery by its body's digest (endpoint.ts).
import type { Secret } from '../../audit/public/secret.ts';
import { hmacSha256, sameBytes, sha256HeaderBytes } from '../../inbound/public/signature.ts';

export const GITHUB_SIGNATURE_HEADER = 'x-hub-signature-256';
export const GITHUB_EVENT_HEADER = 'x-github-event';
export const GITHUB_DELIVERY_HEADER = 'x-github-delivery';

export type GithubSignatureCheck = 'ok' | 'missing-signature' | 'malformed-signature' | 'bad-signature';

export function checkGithubSignature(
  secret: Secret,
  rawBody: Buffer,
  header: string | undefined,
): GithubSignatureCheck {
  if (header === undefined || header === '') return 'missing-signature';
  const given = sha256HeaderBytes(header);
  if (given === undefined) return 'malformed-signature';
  // GitHub sends UTF-8 JSON; a body that is not UTF-8 cannot be what GitHub signed.
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(rawBody);
  } catch {
    return 'bad-signature';
  }
  if (rawBody.length === 0) return 'bad-signature';
  return sameBytes(given, hmacSha256(secret.reveal(), rawBody)) ? 'ok' : 'bad-signature';
}
