// Small HTTP helpers shared by the API client and the OAuth token fetcher: reading a response body
// with a size cap, and reading headers and content types the same way everywhere.
import { readBodyPrefix } from '../http/public/body.ts';
import type { Dispatcher } from 'undici';

/** Far above any answer of the spec (pages of 100 projects); a larger body is not the API talking. */
export const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;

export class ResponseTooLargeError extends Error {
  override name = 'ResponseTooLargeError';
  readonly limit: number;
  constructor(limit: number) {
    super(`response body exceeds ${limit} bytes`);
    this.limit = limit;
  }
}

/**
 * The body did not finish within its deadline. undici's own body timeout only bounds the gap
 * between two chunks, so a server dripping one byte at a time would otherwise hold a call open
 * until the size cap, days later.
 */
export class ResponseDeadlineError extends Error {
  override name = 'ResponseDeadlineError';
  readonly deadlineMs: number;
  constructor(deadlineMs: number) {
    super(`response body not complete within ${deadlineMs} ms`);
    this.deadlineMs = deadlineMs;
  }
}

export interface ResponseText {
  text: string;
  bytes: number;
}

/**
 * Reads the whole body as UTF-8, giving up (and destroying the stream) past `maxBytes`, or past
 * `deadlineMs` from the call when given.
 */
export async function readBodyText(
  body: Dispatcher.ResponseData['body'],
  maxBytes = MAX_RESPONSE_BYTES,
  deadlineMs?: number,
): Promise<ResponseText> {
  const deadline =
    deadlineMs === undefined
      ? undefined
      : setTimeout(() => body.destroy(new ResponseDeadlineError(deadlineMs)), deadlineMs);
  try {
    // One capped reader for every body keyroll reads (src/http/body.ts); here a cut body is an error.
    const { text, bytes, truncated } = await readBodyPrefix(body, maxBytes);
    if (truncated) throw new ResponseTooLargeError(maxBytes);
    return { text, bytes };
  } finally {
    clearTimeout(deadline);
  }
}

/** Lets the connection go back to the pool without reading a body nobody needs. */
export async function discardBody(body: Dispatcher.ResponseData['body']): Promise<void> {
  try {
    await body.dump();
  } catch {
    // The answer is already decided; a failure while draining only costs the connection.
  }
}

export function headerValue(headers: Dispatcher.ResponseData['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The media type without parameters, lower-cased ("application/json"), or "none". */
export function mediaType(headers: Dispatcher.ResponseData['headers']): string {
  const value = headerValue(headers, 'content-type');
  if (value === undefined) return 'none';
  return (value.split(';')[0] ?? '').trim().toLowerCase() || 'none';
}

export function isJsonMediaType(type: string): boolean {
  return type === 'application/json' || type.endsWith('+json');
}

/** JSON.parse without its error: V8's SyntaxError quotes the text, which may hold a secret. */
export function parseJsonQuietly(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false };
  }
}
