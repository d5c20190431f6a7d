// Every failure of a request to the API server about a watched resource (list, watch, get, status
// patch, Event) as one error class with a stable code, the HTTP status as a field, and the API
// server's own message (a Status names the object and the reason, never an object's body).
import { KeyrollError } from '../../errors.ts';
import type { ErrorCode } from '../../error-codes.ts';

export type CrdErrorCode = Extract<
  ErrorCode,
  | 'KR_CRD_API_ERROR'
  | 'KR_CRD_CONFLICT'
  | 'KR_CRD_EXPIRED'
  | 'KR_CRD_FORBIDDEN'
  | 'KR_CRD_NOT_FOUND'
  | 'KR_CRD_TIMEOUT'
  | 'KR_CRD_UNREACHABLE'
>;

export class CrdError extends KeyrollError {
  override name = 'CrdError';
  /** The HTTP status, or the `code` of a watch's ERROR event; absent when no answer came. */
  readonly status: number | undefined;
  /** What was asked: `list /apis/keyroll.io/v1alpha1/rotatedkeys`, `patch …/status`. */
  readonly where: string;

  constructor(
    code: CrdErrorCode,
    message: string,
    options: { where: string; status?: number; cause?: unknown; retryable?: boolean },
  ) {
    super(code, message, {
      cause: options.cause,
      retryable: options.retryable ?? code !== 'KR_CRD_FORBIDDEN',
    });
    this.status = options.status;
    this.where = options.where;
  }

  override toFields(): Record<string, unknown> {
    return {
      ...super.toFields(),
      where: this.where,
      ...(this.status === undefined ? {} : { status: this.status }),
    };
  }
}

/** The code of an answer the API server gave with `status`. */
export function codeOfStatus(status: number): CrdErrorCode {
  if (status === 401 || status === 403) return 'KR_CRD_FORBIDDEN';
  if (status === 404) return 'KR_CRD_NOT_FOUND';
  if (status === 409) return 'KR_CRD_CONFLICT';
  if (status === 410) return 'KR_CRD_EXPIRED';
  if (status === 504) return 'KR_CRD_TIMEOUT';
  return 'KR_CRD_API_ERROR';
}

/** The error for an answer with `status`; `reason` is the API server's Status message, cut short. */
export function answerError(where: string, status: number, reason: string | undefined): CrdError {
  const said = reason === undefined || reason === '' ? '' : ` (${reason.slice(0, 300)})`;
  return new CrdError(codeOfStatus(status), `${where}: the API server answered ${String(status)}${said}`, {
    where,
    status,
  });
}
