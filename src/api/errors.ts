// Every failed API call becomes one ApiError with a stable code. Context (status, the API's own
// error code and message, Retry-After) travels as fields, never formatted into the message, and
// no error built here ever holds a response body or a secret (invariant 3): for the roll, the
// body of a failed answer may be the only copy of a new secret.
import { KeyrollError } from '../errors.ts';

export type ApiOperation = 'roll' | 'listProjects' | 'updateProject' | 'updateConsent';

export type ApiErrorCode =
  | 'KR_API_BAD_REQUEST'
  | 'KR_API_UNAUTHORIZED'
  | 'KR_API_PLAN_REQUIRED'
  | 'KR_API_FORBIDDEN'
  | 'KR_API_NOT_FOUND'
  | 'KR_API_CONFLICT'
  | 'KR_API_PAYLOAD_TOO_LARGE'
  | 'KR_API_RATE_LIMITED'
  | 'KR_API_SERVER_ERROR'
  /** Any other status the spec does not list (405, 422, a 3xx the client does not follow...). */
  | 'KR_API_UNEXPECTED_STATUS'
  /** A 2xx whose body is not the spec's shape (HTML from a proxy, empty, truncated JSON...). */
  | 'KR_API_MALFORMED_RESPONSE'
  | 'KR_API_TIMEOUT'
  | 'KR_API_CONNECTION'
  | 'KR_API_ABORTED'
  /** keyroll's own credential could not be obtained (unreadable file, OAuth token endpoint down). */
  | 'KR_API_CREDENTIAL_UNAVAILABLE';

const RETRYABLE = new Set<ApiErrorCode>([
  'KR_API_RATE_LIMITED',
  'KR_API_SERVER_ERROR',
  'KR_API_TIMEOUT',
  'KR_API_CONNECTION',
]);

export interface ApiErrorInit {
  code: ApiErrorCode;
  operation: ApiOperation;
  message: string;
  status?: number;
  apiCode?: string;
  apiMessage?: string;
  details?: unknown;
  retryAfterMs?: number;
  outcomeUnknown?: boolean;
  cause?: unknown;
}

export class ApiError extends KeyrollError {
  override name = 'ApiError';
  declare readonly code: ApiErrorCode;
  readonly operation: ApiOperation;
  /** HTTP status of the answer; absent when no answer arrived (timeout, connection). */
  readonly status?: number;
  /** The spec's `error.code` (e.g. PLAN_REQUIRED) when the body was the spec's error envelope. */
  readonly apiCode?: string;
  /** The spec's `error.message`. */
  readonly apiMessage?: string;
  /** The spec's `error.details`, as sent. */
  readonly details?: unknown;
  /** For 429: how long to wait, from `Retry-After` (seconds or HTTP date). */
  readonly retryAfterMs?: number;
  /**
   * True for roll answers where the API may have applied the roll (5xx, timeout, reset,
   * unparseable 2xx): the old secret may be dead, so the caller probes the stored one.
   */
  readonly outcomeUnknown: boolean;

  constructor(init: ApiErrorInit) {
    super(init.code, init.message, { cause: init.cause, retryable: RETRYABLE.has(init.code) });
    this.operation = init.operation;
    if (init.status !== undefined) this.status = init.status;
    if (init.apiCode !== undefined) this.apiCode = init.apiCode;
    if (init.apiMessage !== undefined) this.apiMessage = init.apiMessage;
    if (init.details !== undefined) this.details = init.details;
    if (init.retryAfterMs !== undefined) this.retryAfterMs = init.retryAfterMs;
    this.outcomeUnknown = init.outcomeUnknown ?? false;
  }

  override toFields(): Record<string, unknown> {
    const fields: Record<string, unknown> = {
      ...super.toFields(),
      operation: this.operation,
      outcomeUnknown: this.outcomeUnknown,
    };
    if (this.status !== undefined) fields['status'] = this.status;
    if (this.apiCode !== undefined) fields['apiCode'] = this.apiCode;
    if (this.apiMessage !== undefined) fields['apiMessage'] = this.apiMessage;
    if (this.details !== undefined) fields['details'] = this.details;
    if (this.retryAfterMs !== undefined) fields['retryAfterMs'] = this.retryAfterMs;
    return fields;
  }
}

/** The stable code for an HTTP status the API answered with. */
export function codeForStatus(status: number): ApiErrorCode {
  switch (status) {
    case 400:
      return 'KR_API_BAD_REQUEST';
    case 401:
      return 'KR_API_UNAUTHORIZED';
    case 402:
      return 'KR_API_PLAN_REQUIRED';
    case 403:
      return 'KR_API_FORBIDDEN';
    case 404:
      return 'KR_API_NOT_FOUND';
    case 409:
      return 'KR_API_CONFLICT';
    case 413:
      return 'KR_API_PAYLOAD_TOO_LARGE';
    case 429:
      return 'KR_API_RATE_LIMITED';
    default:
      return status >= 500 && status <= 599 ? 'KR_API_SERVER_ERROR' : 'KR_API_UNEXPECTED_STATUS';
  }
}

// Errors raised before any byte of the request can have reached the API: the roll cannot have
// been applied, so its outcome is known (not rolled).
const NEVER_CONNECTED = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_CONNECT_TIMEOUT',
]);

/**
 * Maps a transport failure (undici or Node network error) to an ApiError. The undici error is
 * kept as `cause`: it names sockets and timeouts, never a body.
 */
export function transportError(error: unknown, operation: ApiOperation, phase: 'headers' | 'body'): ApiError {
  const code = errorCodeOf(error);
  const mayHaveApplied = operation === 'roll' && !NEVER_CONNECTED.has(code ?? '');
  const base = { operation, cause: error, outcomeUnknown: mayHaveApplied };
  switch (code) {
    case 'UND_ERR_HEADERS_TIMEOUT':
      return new ApiError({
        ...base,
        code: 'KR_API_TIMEOUT',
        message: `${operation}: no response headers within the timeout`,
      });
    case 'UND_ERR_BODY_TIMEOUT':
      return new ApiError({
        ...base,
        code: 'KR_API_TIMEOUT',
        message: `${operation}: response body stalled past the timeout`,
      });
    case 'UND_ERR_CONNECT_TIMEOUT':
      return new ApiError({
        ...base,
        code: 'KR_API_TIMEOUT',
        message: `${operation}: could not connect within the timeout`,
      });
    case 'UND_ERR_ABORTED':
    case 'ABORT_ERR':
      return new ApiError({ ...base, code: 'KR_API_ABORTED', message: `${operation}: request aborted` });
    default:
      break;
  }
  if (error instanceof Error && error.name === 'AbortError') {
    return new ApiError({ ...base, code: 'KR_API_ABORTED', message: `${operation}: request aborted` });
  }
  const what =
    phase === 'headers' ? 'connection failed before an answer' : 'connection failed while reading the answer';
  return new ApiError({
    ...base,
    code: 'KR_API_CONNECTION',
    message: `${operation}: ${what} (${code ?? 'unknown error'})`,
  });
}

function errorCodeOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

/** A credential could not be obtained; names the provider, never the value. */
export class CredentialError extends KeyrollError {
  override name = 'CredentialError';
  /** The provider's description (a reference or token URL), never a value. */
  readonly credential: string;
  /** HTTP status of a token endpoint answer, when there was one. */
  readonly status?: number;
  /** The OAuth `error` code of a token endpoint answer (e.g. invalid_client). */
  readonly oauthError?: string;

  constructor(
    credential: string,
    message: string,
    options: { cause?: unknown; status?: number; oauthError?: string; retryable?: boolean } = {},
  ) {
    super('KR_CREDENTIAL_UNAVAILABLE', message, {
      cause: options.cause,
      retryable: options.retryable ?? false,
    });
    this.credential = credential;
    if (options.status !== undefined) this.status = options.status;
    if (options.oauthError !== undefined) this.oauthError = options.oauthError;
  }

  override toFields(): Record<string, unknown> {
    const fields: Record<string, unknown> = { ...super.toFields(), credential: this.credential };
    if (this.status !== undefined) fields['status'] = this.status;
    if (this.oauthError !== undefined) fields['oauthError'] = this.oauthError;
    return fields;
  }
}
