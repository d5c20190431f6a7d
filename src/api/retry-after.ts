// `Retry-After` (RFC 9110 §10.2.3) is either delay-seconds or an HTTP-date. The spec tells
// clients to honour it on 429; proxies in front of the API may send either form.

/** Milliseconds to wait from `now`, or undefined when the header is absent or unreadable. */
export function parseRetryAfter(header: string | undefined, now: number): number | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  if (value === '') return undefined;
  if (/^\d+$/.test(value)) return Number(value) * 1000;
  // Only a date may carry letters; "1.5" or "-3" are neither form and are ignored, not guessed at.
  if (!/[a-z]/i.test(value)) return undefined;
  const at = Date.parse(value);
  if (Number.isNaN(at)) return undefined;
  // A date in the past means "now"; clock skew must not produce a negative wait.
  return Math.max(0, at - now);
}
