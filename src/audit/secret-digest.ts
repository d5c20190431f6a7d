// The primitives the sanitizer's registry and scan share (secret-registry.ts says why each
// exists): a keyed digest, a rolling hash of 8-character windows (the "tag"), and character
// classes to tell whether the end of a text could be a cut-off copy of a form.
import { hash, randomBytes, randomInt } from 'node:crypto';
import { MIN_FORM_LENGTH } from './secret-forms.ts';

/** Width of the window the scan hashes; every form is at least this long. */
export const PREFIX_LENGTH = MIN_FORM_LENGTH;

const DIGEST_KEY = randomBytes(32).toString('base64');
// An odd multiplier, so the hash of a window depends on every character of it.
const BASE = (randomInt(0, 2 ** 31) * 2 + 1) | 0;
let highPower = 1;
for (let i = 1; i < PREFIX_LENGTH; i++) highPower = Math.imul(highPower, BASE);
const HIGH_POWER = highPower;

/**
 * The keyed digest the registry compares: SHA-256 of the process key followed by `text`, 128 bits
 * (22 base64 characters). A prefix key rather than HMAC: digests are only compared, never sent,
 * so length extension does not matter, and the one-shot hash is some 30 times faster than
 * createHmac for the short texts the scan digests.
 */
export function keyedDigest(text: string): string {
  return hash('sha256', DIGEST_KEY + text, 'base64').slice(0, 22);
}

/** The tag of the PREFIX_LENGTH characters of `text` from `start`. */
export function prefixTag(text: string, start: number): number {
  let tag = 0;
  for (let i = start; i < start + PREFIX_LENGTH; i++) tag = (Math.imul(tag, BASE) + text.charCodeAt(i)) | 0;
  return tag;
}

/** The tag of the next window: `leaving` drops out at the front, `entering` comes in at the back. */
export function rollTag(tag: number, leaving: number, entering: number): number {
  return (Math.imul((tag - Math.imul(leaving, HIGH_POWER)) | 0, BASE) + entering) | 0;
}

const UPPER = '\u0001';
const LOWER = '\u0002';
const DIGIT = '\u0003';

function characterClass(char: string): string {
  if (char >= 'A' && char <= 'Z') return UPPER;
  if (char >= 'a' && char <= 'z') return LOWER;
  if (char >= '0' && char <= '9') return DIGIT;
  return char;
}

export function alphabetOf(form: string): string {
  return [...new Set(Array.from(form, characterClass))].sort().join('');
}

/** True when every character of text[from, to) is of a class that `alphabet` holds. */
export function fitsAlphabet(text: string, from: number, to: number, alphabet: string): boolean {
  for (let i = from; i < to; i++) if (!alphabet.includes(characterClass(text.charAt(i)))) return false;
  return true;
}
