// The spellings under which a secret can turn up in text: an SDK or a server echoing a request
// encodes it (a header in base64, a query string percent-encoded, a body JSON-escaped, a digest
// dump in upper-case hex). The sanitizer blanks each of them; base64 of a larger value that holds
// the secret (`Basic base64(id:secret)`) is found by decoding instead (sanitize.ts), as its
// spelling depends on what surrounds the secret.

/** Secrets shorter than this are blanked only after a credential marker (short-values.ts). */
export const MIN_FORM_LENGTH = 8;

export function formsOf(value: string): string[] {
  const bytes = Buffer.from(value, 'utf8');
  const base64 = bytes.toString('base64');
  const hex = bytes.toString('hex');
  const percent = encodeURIComponent(value);
  const candidates = [
    value,
    base64,
    base64.replace(/=+$/, ''),
    bytes.toString('base64url'),
    hex,
    hex.toUpperCase(),
    percent,
    // Percent escapes in lower case (some encoders), and form encoding (space as '+', '*' kept).
    percent.replace(/%[0-9A-F]{2}/g, (escape) => escape.toLowerCase()),
    new URLSearchParams({ v: value }).toString().slice(2),
    JSON.stringify(value).slice(1, -1),
  ];
  return [...new Set(candidates)].filter((form) => form.length >= MIN_FORM_LENGTH);
}
