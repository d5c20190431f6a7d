// The HMAC-SHA256 signatures every signed endpoint checks (the trigger's, GitHub's
// X-Hub-Signature-256, GitGuardian's), and the constant-time comparison they and the metrics
// token use. Each sender signs different bytes with a differently built key; what they share is
// here: the `sha256=<64 hex digits>` header, the MAC, and a comparison whose time does not say
// how many leading bytes matched.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Secret } from '../audit/public/secret.ts';

/**
 * The shortest HMAC key any signed endpoint accepts (trigger keys, GitHub's webhook secret,
 * GitGuardian's signature token), in bytes: a key shorter than the hash's 32-byte output is
 * guessable sooner than the signature itself, and short values are the ones the sanitizer can only
 * blank after a credential marker.
 */
export const MIN_SIGNING_KEY_BYTES = 32;

/** True when `key` is shorter than MIN_SIGNING_KEY_BYTES (UTF-8 bytes, not characters). */
export function signingKeyTooShort(key: Secret): boolean {
  return Buffer.byteLength(key.reveal(), 'utf8') < MIN_SIGNING_KEY_BYTES;
}

/** True when both hold the same bytes; the time taken depends on the lengths only. */
export function sameBytes(given: Buffer, expected: Buffer): boolean {
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** HMAC-SHA256 keyed with `key` over `parts` in order (strings as UTF-8). */
export function hmacSha256(key: string, ...parts: readonly (string | Buffer)[]): Buffer {
  const mac = createHmac('sha256', key);
  for (const part of parts) mac.update(part);
  return mac.digest();
}

/** The header value for a MAC: `sha256=<64 lowercase hex digits>`. */
export function sha256Header(mac: Buffer): string {
  return `sha256=${mac.toString('hex')}`;
}

/** The 32 MAC bytes of a `sha256=<64 hex digits>` header (surrounding whitespace ignored); undefined for any other shape. */
export function sha256HeaderBytes(header: string): Buffer | undefined {
  const match = /^sha256=([0-9a-fA-F]{64})$/.exec(header.trim());
  return match?.[1] === undefined ? undefined : Buffer.from(match[1], 'hex');
}
