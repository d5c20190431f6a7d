// The one error every backend raises. It names the backend, the operation and the path as
// fields, so the engine can audit and alert on it without parsing messages, and carries a
// stable code that says whether trying again can help. Never put a secret, a request body or
// a response body into the message: a backend's error text may echo what it was sent.
import { KeyrollError } from '../errors.ts';
import type { BackendKind } from './types.ts';

export type BackendOperation =
  'preflight' | 'lock' | 'unlock' | 'intent' | 'write' | 'read' | 'state' | 'record';

export type BackendErrorCode =
  /** Connection refused/reset, DNS failure, 5xx: the backend may answer later. */
  | 'KR_BACKEND_UNAVAILABLE'
  /**
   * A request quota (AWS ThrottlingException, a Vault/OpenBao rate-limit quota's 429) still
   * refused the call after it waited out its budget (invariant 11): the backend answers, only not
   * this fast. Raised only once the wait is over, so it is a failure of the step, not of a request.
   */
  | 'KR_BACKEND_THROTTLED'
  /** The request did not finish in time; its outcome is unknown. */
  | 'KR_BACKEND_TIMEOUT'
  /** 401/403, AccessDenied, a policy without the needed capability, a file permission error. */
  | 'KR_BACKEND_DENIED'
  /** A check-and-set write lost against another writer. */
  | 'KR_BACKEND_CONFLICT'
  /** A fenced write (or a lock refresh) found that this process no longer holds the key lock. */
  | 'KR_LOCK_LOST'
  /** The secret (or its mount/parent) does not exist where it must. */
  | 'KR_BACKEND_NOT_FOUND'
  /** The backend answered with something that is not what its API documents. */
  | 'KR_BACKEND_INVALID_RESPONSE'
  /** The target itself is unusable (a path escaping the base directory, an empty name). */
  | 'KR_BACKEND_INVALID_TARGET'
  /**
   * The secret (or its lock companion) is scheduled for deletion (AWS): nothing can use it, and
   * its name stays reserved, until an operator restores it (RestoreSecret).
   */
  | 'KR_BACKEND_SCHEDULED_FOR_DELETION'
  /**
   * (AWS) The secret is at its version quota: Secrets Manager keeps at most 100 versions and never
   * removes one younger than 24 hours, so a PutSecretValue over it is refused (LimitExceededException).
   * Checked before the lock (nothing rolled) and mapped when AWS refuses a put. Only time frees it.
   */
  | 'KR_BACKEND_VERSION_QUOTA'
  /** Anything else the backend refused (4xx not covered above, an I/O error on disk). */
  | 'KR_BACKEND_FAILED';

/** Codes where the same call may succeed when tried again. */
const RETRYABLE_CODES: ReadonlySet<BackendErrorCode> = new Set([
  'KR_BACKEND_UNAVAILABLE',
  'KR_BACKEND_THROTTLED',
  'KR_BACKEND_TIMEOUT',
]);

export interface BackendErrorContext {
  /** The policy's name for the backend instance. */
  backend: string;
  kind: BackendKind;
  operation: BackendOperation;
  /** The target path (secret name, KV path, file path); never the value. */
  path: string;
  /** HTTP status of the backend's answer, when there was one. */
  status?: number;
}

export interface BackendErrorOptions extends BackendErrorContext {
  cause?: unknown;
  /** Overrides the code's default (UNAVAILABLE and TIMEOUT are retryable, the rest not). */
  retryable?: boolean;
}

export class BackendError extends KeyrollError {
  override name = 'BackendError';
  declare readonly code: BackendErrorCode;
  readonly backend: string;
  readonly kind: BackendKind;
  readonly operation: BackendOperation;
  readonly path: string;
  readonly status: number | undefined;

  constructor(code: BackendErrorCode, message: string, options: BackendErrorOptions) {
    super(code, message, { cause: options.cause, retryable: options.retryable ?? RETRYABLE_CODES.has(code) });
    this.backend = options.backend;
    this.kind = options.kind;
    this.operation = options.operation;
    this.path = options.path;
    this.status = options.status;
  }

  override toFields(): Record<string, unknown> {
    return {
      ...super.toFields(),
      backend: this.backend,
      backendKind: this.kind,
      operation: this.operation,
      path: this.path,
      ...(this.status === undefined ? {} : { status: this.status }),
      retryable: this.retryable,
    };
  }
}

/** The code for an HTTP answer of a backend's API (Vault; the AWS SDK maps its own). */
export function codeForHttpStatus(status: number): BackendErrorCode {
  if (status === 401 || status === 403) return 'KR_BACKEND_DENIED';
  if (status === 404) return 'KR_BACKEND_NOT_FOUND';
  if (status === 408) return 'KR_BACKEND_TIMEOUT';
  if (status === 409 || status === 412) return 'KR_BACKEND_CONFLICT';
  // A rate-limit quota: waited out by the client (src/backends/quota/throttle.ts) before it shows.
  if (status === 429) return 'KR_BACKEND_THROTTLED';
  // Every 5xx (including Vault's 503 "sealed" / standby) may pass.
  if (status >= 500) return 'KR_BACKEND_UNAVAILABLE';
  return 'KR_BACKEND_FAILED';
}

const UNAVAILABLE_ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
]);
const TIMEOUT_ERRNOS = new Set([
  'ETIMEDOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

/**
 * The code for a transport failure (connection refused, reset, timeout, abort by a timeout
 * signal), looking through the `cause` chain; undefined when `error` is not one.
 */
export function codeForTransportError(error: unknown): BackendErrorCode | undefined {
  let current: unknown = error;
  for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
    if (current.name === 'TimeoutError') return 'KR_BACKEND_TIMEOUT';
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (TIMEOUT_ERRNOS.has(code)) return 'KR_BACKEND_TIMEOUT';
      if (UNAVAILABLE_ERRNOS.has(code)) return 'KR_BACKEND_UNAVAILABLE';
    }
    current = current.cause;
  }
  return undefined;
}

/** Human wording for a code, used to build fixed messages ("vault write of x: denied (403)"). */
export function describeCode(code: BackendErrorCode): string {
  switch (code) {
    case 'KR_BACKEND_UNAVAILABLE':
      return 'backend unavailable';
    case 'KR_BACKEND_THROTTLED':
      return 'throttled by a request quota past the wait allowed';
    case 'KR_BACKEND_TIMEOUT':
      return 'timed out';
    case 'KR_BACKEND_DENIED':
      return 'permission denied';
    case 'KR_BACKEND_CONFLICT':
      return 'conflicting write';
    case 'KR_LOCK_LOST':
      return 'the key lock is held by another runner';
    case 'KR_BACKEND_NOT_FOUND':
      return 'not found';
    case 'KR_BACKEND_INVALID_RESPONSE':
      return 'invalid response';
    case 'KR_BACKEND_INVALID_TARGET':
      return 'invalid target';
    case 'KR_BACKEND_SCHEDULED_FOR_DELETION':
      return 'scheduled for deletion';
    case 'KR_BACKEND_VERSION_QUOTA':
      return "the secret's version quota is full";
    case 'KR_BACKEND_FAILED':
      return 'request failed';
  }
}
