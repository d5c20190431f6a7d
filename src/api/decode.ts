// Turns a raw HTTP answer into data or one ApiError. No function here puts a body, a parse error
// (V8 quotes the text) or a zod error (it may hold values) into an error: only the operation, the
// status, the content type, the length, and the spec's error fields.
import type { z } from 'zod';
import { truncateSanitized } from '../audit/public/sanitize.ts';
import { Secret } from '../audit/public/secret.ts';
import { ApiError, codeForStatus, type ApiOperation } from './errors.ts';
import { headerValue, isJsonMediaType, parseJsonQuietly } from './http.ts';
import { parseRetryAfter } from './retry-after.ts';
import { describeIssues, ErrorEnvelope, RolledKeyBody } from './schema.ts';

/** One answer, read whole. `text` may hold a new secret (roll): it never leaves this module. */
export interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Media type without parameters, or "none". */
  contentType: string;
  text: string;
  bytes: number;
}

export interface RolledKey {
  keyId: string;
  secret: Secret;
  /**
   * Set when `data.key` was present but the rest of the answer did not match the spec (status,
   * content type, keyId...): the engine stores first and reports after, since the old secret is dead.
   */
  malformed?: string;
}

const MAX_API_MESSAGE = 500;

function isSuccess(status: number): boolean {
  return status >= 200 && status <= 299;
}

/** The ApiError for a non-2xx answer, with the spec's error fields when the body is its envelope. */
export function statusError(operation: ApiOperation, response: RawResponse, now: number): ApiError {
  const code = codeForStatus(response.status);
  const parsed = parseJsonQuietly(response.text);
  const envelope = parsed.ok ? ErrorEnvelope.safeParse(parsed.value) : undefined;
  const retryAfterMs =
    response.status === 429 ? parseRetryAfter(headerValue(response.headers, 'retry-after'), now) : undefined;
  // A roll answered with 5xx may have been applied before the server failed.
  const outcomeUnknown = operation === 'roll' && response.status >= 500;
  if (envelope?.success === true) {
    const { error } = envelope.data;
    return new ApiError({
      code,
      operation,
      status: response.status,
      message: `${operation}: HTTP ${response.status} ${error.code}`,
      apiCode: error.code,
      // Sanitized before the cut: cut first, a secret the server echoed would leave its prefix.
      apiMessage: truncateSanitized(error.message, MAX_API_MESSAGE),
      details: error.details,
      retryAfterMs,
      outcomeUnknown,
    });
  }
  return new ApiError({
    code,
    operation,
    status: response.status,
    message: `${operation}: HTTP ${response.status} with ${describeBody(operation, response)}, not the API's error envelope`,
    retryAfterMs,
    outcomeUnknown,
  });
}

/** Data of a 2xx answer checked against `schema`, or the ApiError for any other answer. */
export function decodeBody<T>(
  operation: ApiOperation,
  response: RawResponse,
  schema: z.ZodType<T>,
  now: number,
): T {
  if (!isSuccess(response.status)) throw statusError(operation, response, now);
  if (!isJsonMediaType(response.contentType)) {
    throw malformed(operation, response, 'not JSON');
  }
  const parsed = parseJsonQuietly(response.text);
  if (!parsed.ok) throw malformed(operation, response, response.bytes === 0 ? 'empty' : 'unparseable JSON');
  const result = schema.safeParse(parsed.value);
  if (!result.success) throw malformed(operation, response, describeIssues(result.error));
  return result.data;
}

/**
 * The new secret from a roll answer. Whenever the answer carries a string `data.key` on a status
 * where the roll may have happened (2xx, 5xx), the secret is returned, never thrown away: the old
 * one is already dead, so this may be the only working credential (invariant 4). What else was
 * wrong goes into `malformed`. Without `data.key`, a 2xx throws with outcomeUnknown so the caller
 * probes the stored secret.
 */
export function decodeRolledKey(response: RawResponse, keyId: string, now: number): RolledKey {
  const mayHaveRolled = isSuccess(response.status) || response.status >= 500;
  const parsed = mayHaveRolled ? parseJsonQuietly(response.text) : undefined;
  const key = parsed?.ok === true ? dataKeyOf(parsed.value) : undefined;
  if (parsed?.ok === true && key !== undefined) {
    const secret = new Secret(key);
    const problems: string[] = [];
    if (!isSuccess(response.status)) problems.push(`HTTP ${response.status}`);
    if (!isJsonMediaType(response.contentType)) problems.push(`content-type ${response.contentType}`);
    const body = RolledKeyBody.safeParse(parsed.value);
    if (!body.success) problems.push(describeIssues(body.error));
    else if (body.data.data.keyId !== keyId) problems.push(`data.keyId names a different key than ${keyId}`);
    const rolled: RolledKey = { keyId, secret };
    if (problems.length > 0) rolled.malformed = `roll answer did not match the spec: ${problems.join('; ')}`;
    return rolled;
  }
  if (!isSuccess(response.status)) throw statusError('roll', response, now);
  const why =
    response.bytes === 0 ? 'empty' : parsed?.ok === true ? 'no string data.key' : 'unparseable JSON';
  throw new ApiError({
    code: 'KR_API_MALFORMED_RESPONSE',
    operation: 'roll',
    status: response.status,
    message: `roll: HTTP ${response.status} with ${describeBody('roll', response)} (${why}); the key may have been rolled`,
    outcomeUnknown: true,
  });
}

function dataKeyOf(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const data = (value as { data?: unknown }).data;
  if (typeof data !== 'object' || data === null) return undefined;
  const key = (data as { key?: unknown }).key;
  return typeof key === 'string' && key !== '' ? key : undefined;
}

function malformed(operation: ApiOperation, response: RawResponse, why: string): ApiError {
  return new ApiError({
    code: 'KR_API_MALFORMED_RESPONSE',
    operation,
    status: response.status,
    message: `${operation}: HTTP ${response.status} with ${describeBody(operation, response)} that is not the spec's shape (${why})`,
  });
}

// The roll's body length is left out too: it would hint at the secret's length.
function describeBody(operation: ApiOperation, response: RawResponse): string {
  if (response.bytes === 0) return 'an empty body';
  if (operation === 'roll') return `a ${response.contentType} body`;
  return `a ${response.contentType} body of ${response.bytes} bytes`;
}
