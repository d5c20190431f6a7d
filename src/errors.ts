// One base class for every error keyroll raises. Subclasses live with their concern
// (api/errors.ts, backends/errors.ts, policy/errors.ts, ...) and carry a stable `code`
// plus context as fields, never formatted into the message, and never the secret. The code is
// one of the catalogue (error-codes.ts): a code missing there fails the type check.
import { isErrorCode, type ErrorCode } from './error-codes.ts';

export interface KeyrollErrorOptions {
  cause?: unknown;
  /** True when the same call may succeed if tried again (network blips, 5xx, lock busy). */
  retryable?: boolean;
}

export class KeyrollError extends Error {
  override name = 'KeyrollError';
  readonly code: ErrorCode;
  readonly retryable: boolean;

  constructor(code: ErrorCode, message: string, options: KeyrollErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options.retryable ?? false;
  }

  /** Fields safe to put in an audit event or alert (subclasses add theirs). */
  toFields(): Record<string, unknown> {
    return { errorCode: this.code, errorMessage: this.message };
  }
}

/**
 * A wrong flag, argument or configuration value: one plain message and exit 2 (`KR_USAGE`,
 * docs/exit-codes.md), before anything is touched. The message never echoes text that could be a
 * secret (a mistyped --trigger-key could be the key itself).
 */
export class UsageError extends KeyrollError {
  override name = 'UsageError';
  constructor(message: string, options: { cause?: unknown } = {}) {
    super('KR_USAGE', message, options);
  }
}

/** The error's stable code when it has one, else a generic one for foreign errors. */
export function errorCode(error: unknown): string {
  if (error instanceof KeyrollError) return error.code;
  const code = error instanceof Error ? (error as { code?: unknown }).code : undefined;
  if (typeof code === 'string') return code;
  return 'KR_UNEXPECTED';
}

/**
 * The code an error that wraps `error` (or reports `code`) carries: the catalogue code it has, else
 * KR_UNEXPECTED. A foreign code (a Node system error's ECONNRESET) is not one operators can route on.
 */
export function catalogueCode(errorOrCode: unknown): ErrorCode {
  return typedCode(errorOrCode).errorCode;
}

/** A failure's code as a typed field holds it: a catalogue code, and the foreign code it stands for. */
export interface TypedCode {
  errorCode: ErrorCode;
  /** Set when errorCode is KR_UNEXPECTED for a code from outside keyroll (ECONNRESET, an SDK's error name). */
  foreignCode?: string;
}

/**
 * The code of `error` (or `code`) for a typed field: its catalogue code; a foreign one becomes
 * KR_UNEXPECTED, as catalogueCode makes it, and is kept beside it so nothing that showed it is lost.
 */
export function typedCode(errorOrCode: unknown): TypedCode {
  const code = typeof errorOrCode === 'string' ? errorOrCode : errorCode(errorOrCode);
  return isErrorCode(code) ? { errorCode: code } : { errorCode: 'KR_UNEXPECTED', foreignCode: code };
}

/** The code as it reads outside keyroll (alert payloads, audit fields): the foreign one when there is one. */
export function shownCode(code: TypedCode): string {
  return code.foreignCode ?? code.errorCode;
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Why a request found no server: fetch's "fetch failed" keeps the reason (ECONNREFUSED, a TLS
 * error) in its cause, so the cause's message when there is one, else the error's own.
 */
export function transportReason(error: unknown): string {
  return error instanceof Error && error.cause instanceof Error ? error.cause.message : errorMessage(error);
}
