// The sanitizer behind the Secret type (invariant 3). Every secret value this process has seen
// is registered here, and `sanitizeText` blanks each one, plus its base64, base64url and hex
// forms, from any text bound for a log line, an error message or an alert body.
// A leak through a path nobody thought of (an SDK error echoing a request, a stack trace)
// is caught here as a last line of defence; the first line is never handing the value out.

const REDACTED = '[REDACTED]';
// Bounded so a daemon that runs for months does not grow without limit; 4096 secrets is far
// more than are alive in one process at once (a rotation only needs its own secret registered).
const MAX_TRACKED = 4096;

const forms = new Map<string, string[]>();
let pattern: RegExp | undefined;
// Every form is at least PREFIX_LENGTH long, so a text holds one only if one of its
// PREFIX_LENGTH-character windows is a form's first characters. Checking the windows first keeps
// the common case (a line with no secret) linear in the text: the one regex of every form grows
// with each rotation, and ran on every audit line it made a 1,000-key run quadratic
// (bench/emergency.ts: 19 of 41 CPU seconds). Counted, as forms may share a prefix.
const PREFIX_LENGTH = 8;
const prefixes = new Map<string, number>();

function countPrefixes(values: readonly string[], delta: 1 | -1): void {
  for (const form of values) {
    const prefix = form.slice(0, PREFIX_LENGTH);
    const count = (prefixes.get(prefix) ?? 0) + delta;
    if (count > 0) prefixes.set(prefix, count);
    else prefixes.delete(prefix);
  }
}

function mayHoldSecret(text: string): boolean {
  for (let i = 0; i + PREFIX_LENGTH <= text.length; i++) {
    if (prefixes.has(text.slice(i, i + PREFIX_LENGTH))) return true;
  }
  return false;
}

function formsOf(value: string): string[] {
  const buf = Buffer.from(value, 'utf8');
  const candidates = [
    value,
    buf.toString('base64'),
    buf.toString('base64').replace(/=+$/, ''),
    buf.toString('base64url'),
    buf.toString('hex'),
    encodeURIComponent(value),
    JSON.stringify(value).slice(1, -1),
  ];
  // Short values would blank ordinary words; secrets are long, so anything under 8 chars is ignored.
  return [...new Set(candidates)].filter((form) => form.length >= PREFIX_LENGTH);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Registers a secret value so it is blanked from every sanitized text from now on. */
export function registerSecretValue(value: string): void {
  if (value.length < 8) return;
  if (forms.has(value)) {
    // Seen again: move it to the young end, so credentials in use are the last to be evicted.
    const known = forms.get(value) as string[];
    forms.delete(value);
    forms.set(value, known);
    return;
  }
  if (forms.size >= MAX_TRACKED) {
    const oldest = forms.keys().next().value;
    if (oldest !== undefined) {
      countPrefixes(forms.get(oldest) ?? [], -1);
      forms.delete(oldest);
    }
  }
  const valueForms = formsOf(value);
  forms.set(value, valueForms);
  countPrefixes(valueForms, 1);
  pattern = undefined;
}

/** Blanks every registered secret (and its encoded forms) from `text`. */
export function sanitizeText(text: string): string {
  if (forms.size === 0 || !mayHoldSecret(text)) return text;
  if (pattern === undefined) {
    // Longest first so a base64 form that contains the raw value is replaced whole.
    const all = [...forms.values()].flat().sort((a, b) => b.length - a.length);
    pattern = new RegExp(all.map(escapeRegExp).join('|'), 'g');
  }
  return text.replace(pattern, REDACTED);
}

/** Sanitizes every string inside a JSON-like value (for alert bodies and log fields). */
export function sanitizeValue<T>(value: T): T {
  // undefined has no JSON form (JSON.stringify returns undefined for it, whatever its type says).
  if (forms.size === 0 || value === undefined) return value;
  return JSON.parse(sanitizeText(JSON.stringify(value))) as T;
}

/** For tests: forget all registered secrets. */
export function resetSanitizerForTests(): void {
  forms.clear();
  prefixes.clear();
  pattern = undefined;
}
