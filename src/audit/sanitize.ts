// The sanitizer behind the Secret type (invariant 3). Every secret value this process has seen
// is registered (secret-registry.ts keeps digests, never the value), and `sanitizeText` blanks
// from any text bound for a log line, an error message or an alert body:
//   - each registered secret in each of its spellings (secret-forms.ts: raw, base64, base64url,
//     lower- and upper-case hex, percent- and form-encoded, JSON-escaped);
//   - a base64 run whose decoded text holds a secret (`Basic base64(id:secret)`), the whole run;
//   - a text that ends with the first 8 or more characters of a secret (a body cut by a capped
//     read), from the secret's start to the end;
//   - a secret under 8 characters, only where a credential marker precedes it (`Authorization:`,
//     `Bearer`, `token=`, `"password":`, `Basic base64(id:pw)`): blanking short values everywhere
//     would blank ordinary words, and refusing them would refuse credentials keyroll cannot choose.
// A leak through a path nobody thought of (an SDK error echoing a request, a stack trace) is
// caught here as a last line of defence; the first line is never handing the value out.
// Text is sanitized before it is cut (`truncateSanitized`): cut first, a prefix of the secret
// would no longer match and would survive.
import { fitsAlphabet, keyedDigest, PREFIX_LENGTH, prefixTag, rollTag } from './secret-digest.ts';
import {
  formsTagged,
  isShortSecret,
  knownCounts,
  pinValue,
  registerValue,
  resetRegistryForTests,
  shapesStartingWith,
} from './secret-registry.ts';

export { withSecretScope } from './secret-registry.ts';

const REDACTED = '[REDACTED]';

type Range = [start: number, end: number];

/**
 * Finds every registered form in `text`. With `trailing`, a text ending with a form's first
 * PREFIX_LENGTH or more characters (in the form's alphabet, shorter than the form) counts too.
 */
function scanForms(text: string, ranges: Range[], trailing: boolean): boolean {
  const n = text.length;
  if (n < PREFIX_LENGTH) return false;
  let found = false;
  let tag = prefixTag(text, 0);
  for (let i = 0; ; i++) {
    const lengths = formsTagged(tag);
    if (lengths !== undefined && matchAt(text, i, tag, lengths, ranges, trailing)) found = true;
    if (i + PREFIX_LENGTH >= n) break;
    tag = rollTag(tag, text.charCodeAt(i), text.charCodeAt(i + PREFIX_LENGTH));
  }
  return found;
}

function matchAt(
  text: string,
  i: number,
  tag: number,
  lengths: ReadonlyMap<number, ReadonlyMap<string, number>>,
  ranges: Range[],
  trailing: boolean,
): boolean {
  const n = text.length;
  let found = false;
  let longerThanRest = false;
  for (const [length, digests] of lengths) {
    if (i + length > n) longerThanRest = true;
    else if (digests.has(keyedDigest(text.slice(i, i + length)))) {
      ranges.push([i, i + length]);
      found = true;
    }
  }
  if (!trailing || !longerThanRest) return found;
  const shapes = shapesStartingWith(tag, keyedDigest(text.slice(i, i + PREFIX_LENGTH)));
  for (const shape of shapes?.keys() ?? []) {
    const colon = shape.indexOf(':');
    if (i + Number(shape.slice(0, colon)) > n && fitsAlphabet(text, i, n, shape.slice(colon + 1))) {
      ranges.push([i, n]);
      return true;
    }
  }
  return found;
}

// Long enough to decode to the shortest long secret (8 bytes → 11 characters).
const MIN_BASE64_RUN = 11;
const BASE64_RUN = /[A-Za-z0-9+/_-]{11,}={0,2}/g;

function covered(ranges: readonly Range[], start: number, end: number): boolean {
  return ranges.some(([from, to]) => from <= start && end <= to);
}

/** Blanks base64 runs (either alphabet) whose decoded text holds a registered secret. */
function scanEncodedRuns(text: string, ranges: Range[]): void {
  for (const match of text.matchAll(BASE64_RUN)) {
    // A run right after a backslash begins with the rest of an escape (`\n`, `\u00e9`), not data.
    const start =
      match.index > 0 && escapeStartsAt(text, match.index - 1)
        ? match.index + (text.charAt(match.index) === 'u' ? 5 : 1)
        : match.index;
    const end = match.index + match[0].length;
    if (end - start < MIN_BASE64_RUN || covered(ranges, start, end)) continue;
    // Node decodes both alphabets; the run is decoded from its start, where an encoder starts it
    // (after `Basic `, a quote, `=`), which covers the headers and bodies that echo credentials.
    const decoded = Buffer.from(text.slice(start, end), 'base64').toString('utf8');
    if (scanForms(decoded, [], false)) ranges.push([start, end]);
  }
}

// A credential marker, then the value (group 1) up to a delimiter. Quotes and a JSON escape's
// backslash may sit around the name, so `"token":"ab1"` and `\"token\":\"ab1\"` both match.
const SHORT_AFTER_MARKER =
  /(?:\b(?:proxy-)?authorization\\?["']?\s*[:=]\s*\\?["']?(?:(?:bearer|token|apikey)\s+)?|\bbearer\s+|\b[\w-]*(?:token|secret|passw(?:or)?d|pwd|api[_-]?key|credential)[\w-]*\\?["']?\s*[:=]\s*\\?["']?)([^\s"'`&,;:<>(){}[\]\\]{1,7})(?![^\s"'`&,;:<>(){}[\]\\])/dgi;
const BASIC_CREDENTIAL = /\bbasic\s+([A-Za-z0-9+/_-]+={0,2})/dgi;

function isShortCredential(value: string): boolean {
  return value.length > 0 && value.length < PREFIX_LENGTH && isShortSecret(keyedDigest(value));
}

/** Blanks registered values under 8 characters where a credential marker precedes them. */
function scanShortContexts(text: string, ranges: Range[]): void {
  for (const match of text.matchAll(SHORT_AFTER_MARKER)) {
    const value = match[1];
    const at = match.indices?.[1];
    if (value !== undefined && at !== undefined && isShortCredential(value)) ranges.push([at[0], at[1]]);
  }
  for (const match of text.matchAll(BASIC_CREDENTIAL)) {
    const encoded = match[1];
    const at = match.indices?.[1];
    if (encoded === undefined || at === undefined) continue;
    const decoded = Buffer.from(encoded, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    const parts = colon < 0 ? [decoded] : [decoded.slice(0, colon), decoded.slice(colon + 1)];
    if (parts.some(isShortCredential)) ranges.push([at[0], at[1]]);
  }
}

/** True when text[at] begins a JSON/JS escape (an odd run of backslashes ends at it). */
function escapeStartsAt(text: string, at: number): boolean {
  if (text.charAt(at) !== '\\') return false;
  let before = 0;
  while (at - before - 1 >= 0 && text.charAt(at - before - 1) === '\\') before++;
  return before % 2 === 0;
}

function escapeLength(text: string, at: number): number {
  return text.charAt(at + 1) === 'u' ? 6 : 2;
}

/**
 * Widens a range so it never splits an escape (`\n`, `\"`, `\u00e9`): a line stays parseable JSON
 * when a match starts right after a backslash or inside a `\uXXXX`.
 */
function widenOverEscapes(text: string, [start, end]: Range): Range {
  let from = start;
  for (let back = 1; back <= 5 && start - back >= 0; back++) {
    const at = start - back;
    if (escapeStartsAt(text, at) && at + escapeLength(text, at) > start) {
      from = at;
      break;
    }
  }
  let to = end;
  for (let at = Math.max(from, end - 6); at < end; at++) {
    if (!escapeStartsAt(text, at)) continue;
    const length = escapeLength(text, at);
    if (at + length > to) to = Math.min(text.length, at + length);
    at += length - 1;
  }
  return [from, to];
}

function blank(text: string, found: Range[]): string {
  const ranges = found
    .map((range) => widenOverEscapes(text, range))
    .sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  let out = '';
  let at = 0;
  let current: Range | undefined;
  for (const range of ranges) {
    if (current !== undefined && range[0] < current[1]) {
      current[1] = Math.max(current[1], range[1]);
      continue;
    }
    if (current !== undefined) {
      out += text.slice(at, current[0]) + REDACTED;
      at = current[1];
    }
    current = [range[0], range[1]];
  }
  if (current !== undefined) {
    out += text.slice(at, current[0]) + REDACTED;
    at = current[1];
  }
  return out + text.slice(at);
}

/** Registers a secret value so it is blanked from every sanitized text from now on. */
export function registerSecretValue(value: string): void {
  registerValue(value);
}

/**
 * Pins a long-lived credential (trigger key, bearer token, Vault or OAuth token): never evicted
 * while `lifetimeMs` lasts, or ever when it is not given.
 */
export function pinSecretValue(value: string, lifetimeMs?: number): void {
  pinValue(value, lifetimeMs);
}

/** Blanks every registered secret (and its encoded forms) from `text`. */
export function sanitizeText(text: string): string {
  const known = knownCounts();
  if ((known.long === 0 && known.short === 0) || text === '') return text;
  const ranges: Range[] = [];
  if (known.long > 0) {
    scanForms(text, ranges, true);
    scanEncodedRuns(text, ranges);
  }
  if (known.short > 0) scanShortContexts(text, ranges);
  return ranges.length === 0 ? text : blank(text, ranges);
}

/**
 * Sanitizes, then cuts to at most `maxChars`: the order matters, as a secret cut first would
 * leave a prefix the sanitizer no longer recognises. The cut text is checked once more, so a
 * secret cut short by the caller's own earlier truncation is blanked where it now ends the text.
 */
export function truncateSanitized(text: string, maxChars: number): string {
  const clean = sanitizeText(text);
  if (clean.length <= maxChars) return clean;
  return sanitizeText(clean.slice(0, maxChars)).slice(0, maxChars);
}

function sanitizeParsed(value: unknown): unknown {
  if (typeof value === 'string') return sanitizeText(value);
  if (Array.isArray(value)) return value.map(sanitizeParsed);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [name, inner] of Object.entries(value)) {
    // defineProperty: a "__proto__" key from JSON stays a plain property.
    Object.defineProperty(out, sanitizeText(name), {
      value: sanitizeParsed(inner),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

/**
 * Sanitizes every string inside a JSON-like value (for alert bodies and log fields), each on its
 * own, so a string that ends with a cut-off secret is caught as the end of a text.
 */
export function sanitizeValue<T>(value: T): T {
  const known = knownCounts();
  // undefined has no JSON form (JSON.stringify returns undefined for it, whatever its type says).
  if ((known.long === 0 && known.short === 0) || value === undefined) return value;
  const json = JSON.stringify(value) as string | undefined;
  if (json === undefined) return value;
  return sanitizeParsed(JSON.parse(json)) as T;
}

/** For tests: forget all registered secrets. */
export function resetSanitizerForTests(): void {
  resetRegistryForTests();
}
