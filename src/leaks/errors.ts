// Errors of leak intake. Context travels as fields (status, step), never the leaked value nor a
// response body that may hold it (GitHub's alert answer carries the secret).
import type { ErrorCode } from '../error-codes.ts';
import { KeyrollError, UsageError } from '../errors.ts';

export class ScannerApiError extends KeyrollError {
  override name = 'ScannerApiError';
  /** HTTP status of the scanner's answer; undefined when there was none (network, timeout). */
  readonly status: number | undefined;
  readonly operation: string;
  constructor(
    code: ErrorCode,
    operation: string,
    message: string,
    options: { status?: number; cause?: unknown; retryable?: boolean } = {},
  ) {
    super(code, message, { cause: options.cause, retryable: options.retryable ?? false });
    this.operation = operation;
    this.status = options.status;
  }

  override toFields(): Record<string, unknown> {
    return { ...super.toFields(), operation: this.operation, status: this.status };
  }
}

/** A webhook secret in the policy's `intake` that keyroll refuses to verify with (too short). */
export class WebhookSecretError extends UsageError {
  override name = 'WebhookSecretError';
  /** The policy field, e.g. intake.github.webhookSecret. */
  readonly field: string;
  constructor(field: string, ref: string, message: string) {
    // A configuration error: the daemon exits 2 at start, a reload keeps the old policy.
    super(`${field} (${ref}): ${message}`);
    this.field = field;
  }
}
