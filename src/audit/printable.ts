// Text keyroll did not write itself reaches a terminal only through these functions (issue 27,
// finding 4). Cells and lines carry strings read from the cluster (annotations, an
// ExternalSecret's Ready message, which external-secrets copies from provider errors), from the
// backends (lock owners, intent markers, failure records, held in tags and metadata that others
// may write), and from servers (error messages). Raw, an escape sequence among them moves the
// cursor, erases lines or retitles the terminal: cursor-up and erase-line once made an `owed`
// consumer read `current`. Every such character is shown as a visible escape (`\u001b`), never
// dropped: an operator sees that something was there.
//
// Escaped: C0 controls (ESC, BEL, CR, backspace...), DEL, C1 controls (U+009B is a one-character
// CSI some terminals obey), the line and paragraph separators, and the bidirectional controls
// (U+202E and friends reorder what is shown, so `tnerruc` can read as `current`). Escaping the
// introducer makes any ANSI or OSC sequence inert, its remaining characters printed as text.

/** Characters that may change what a terminal shows beyond printing themselves. */
// eslint-disable-next-line no-control-regex -- matching control characters is this module's purpose
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
/** The same, minus the line feed: for a message keyroll wrote on several lines (a policy error). */
const UNSAFE_BUT_NEWLINE =
  // eslint-disable-next-line no-control-regex -- as above
  /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
/** What JSON.stringify leaves raw of the above (it escapes C0 itself). */
const UNSAFE_IN_JSON = /[\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const SHORT: Readonly<Record<string, string>> = { '\t': '\\t', '\n': '\\n', '\r': '\\r' };

function visibleEscape(char: string): string {
  return SHORT[char] ?? `\\u${(char.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`;
}

/** One cell or value, safe for a terminal: every control and bidi character as a visible escape. */
export function printable(text: string): string {
  return text.replace(UNSAFE, visibleEscape);
}

/** A message keyroll may have written on several lines: as `printable`, line feeds kept. */
export function printableLines(text: string): string {
  return text.replace(UNSAFE_BUT_NEWLINE, visibleEscape);
}

/**
 * A line of keyroll's own words around outside values: `terminalLine\`keyroll: ${keyId}: …\``.
 * Each interpolated value goes through `printable`; the literal parts are keyroll's.
 */
export function terminalLine(words: TemplateStringsArray, ...values: readonly unknown[]): string {
  let out = words[0] ?? '';
  values.forEach((value, i) => {
    out += printable(String(value)) + (words[i + 1] ?? '');
  });
  return out;
}

/**
 * JSON for stdout (`-o json`): JSON.stringify escapes C0 controls but leaves DEL, C1 controls and
 * bidi controls raw, so `jq` or `cat` on a terminal would pass them on. They are written as
 * `\uXXXX` escapes, which parse to the same strings. Such characters occur only inside strings,
 * so replacing them in the whole text leaves the structure alone.
 */
export function printableJson(value: unknown, space?: number): string {
  return escapeJsonText(JSON.stringify(value, null, space));
}

/** The JSON escapes of `printableJson` applied to text that is already JSON (an audit line). */
export function escapeJsonText(json: string): string {
  return json.replace(
    UNSAFE_IN_JSON,
    (char) => `\\u${(char.codePointAt(0) ?? 0).toString(16).padStart(4, '0')}`,
  );
}
