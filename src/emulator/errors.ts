// Errors of the emulator: the spec's error envelope for HTTP answers, and KeyrollError
// subclasses for a bad seed file or a test asking about something that does not exist.
// The spec's list of `error.code` values lives once, with the API client's schemas.
import { API_ERROR_CODES } from '../api/public/schema.ts';
import { KeyrollError } from '../errors.ts';

export { API_ERROR_CODES };
export type ApiErrorCode = (typeof API_ERROR_CODES)[number];

/** The code that goes with a status when nothing more specific applies (docs/emulator.md). */
export function defaultCodeForStatus(status: number): ApiErrorCode {
  switch (status) {
    case 400:
      return 'INVALID_PAYLOAD';
    case 401:
      return 'UNAUTHORIZED';
    case 402:
      return 'PLAN_REQUIRED';
    case 403:
      return 'FORBIDDEN';
    case 404:
      return 'NOT_FOUND';
    case 409:
      return 'CONFLICT';
    case 413:
      return 'PAYLOAD_TOO_LARGE';
    case 429:
      return 'RATE_LIMITED';
    case 503:
      return 'SERVICE_UNAVAILABLE';
    default:
      return status >= 500 ? 'INTERNAL_ERROR' : 'INVALID_PAYLOAD';
  }
}

export function isApiErrorCode(value: string): value is ApiErrorCode {
  return (API_ERROR_CODES as readonly string[]).includes(value);
}

export interface ErrorEnvelope {
  success: false;
  error: { code: string; message: string; details?: unknown };
}

export function errorEnvelope(code: string, message: string, details?: unknown): ErrorEnvelope {
  return { success: false, error: details === undefined ? { code, message } : { code, message, details } };
}

/**
 * A refusal the emulator answers with the spec's envelope. Thrown by route code and turned
 * into the HTTP answer by the server's error handler. Messages never quote credentials.
 */
export class EmulatorRequestError extends KeyrollError {
  override name = 'EmulatorRequestError';
  readonly status: number;
  readonly apiCode: ApiErrorCode;
  readonly details: unknown;
  /** Seconds for the Retry-After header (429 only). */
  readonly retryAfterSeconds: number | undefined;

  constructor(
    status: number,
    message: string,
    options: { apiCode?: ApiErrorCode; details?: unknown; retryAfterSeconds?: number } = {},
  ) {
    super('KR_EMULATOR_REQUEST_REFUSED', message);
    this.status = status;
    this.apiCode = options.apiCode ?? defaultCodeForStatus(status);
    this.details = options.details;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  override toFields(): Record<string, unknown> {
    return { ...super.toFields(), status: this.status, apiCode: this.apiCode };
  }
}

/** The seed file cannot be read or does not describe a consistent world. */
export class EmulatorSeedError extends KeyrollError {
  override name = 'EmulatorSeedError';
  readonly source: string;
  readonly issues: string[];

  constructor(source: string, issues: string[], options: { cause?: unknown } = {}) {
    super('KR_EMULATOR_SEED_INVALID', `Emulator seed ${source} is invalid: ${issues.join('; ')}`, options);
    this.source = source;
    this.issues = issues;
  }

  override toFields(): Record<string, unknown> {
    return { ...super.toFields(), source: this.source, issues: this.issues };
  }
}

/** A test or admin call named an organization, key, principal or project the emulator does not hold. */
export class EmulatorUnknownEntityError extends KeyrollError {
  override name = 'EmulatorUnknownEntityError';
  readonly entity: string;
  readonly id: string;

  constructor(entity: string, id: string) {
    super('KR_EMULATOR_UNKNOWN_ENTITY', `The emulator has no ${entity} with id ${JSON.stringify(id)}`);
    this.entity = entity;
    this.id = id;
  }

  override toFields(): Record<string, unknown> {
    return { ...super.toFields(), entity: this.entity, id: this.id };
  }
}
