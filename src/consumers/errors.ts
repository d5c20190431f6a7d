// Why a consumer could not be refreshed: one error with a stable code per kind of failure, so the
// audit trail, the alert and the metric name it alike. A consumer error never changes a rotation
// (invariant 12): the value is stored; only its delivery lagged.
import { errorMessage, KeyrollError } from '../errors.ts';

export type ConsumerErrorCode =
  /** The object does not exist (404): deleted, renamed, or a typo in the policy. */
  | 'KR_CONSUMER_NOT_FOUND'
  /** keyroll's identity may not do this (403): the Role does not name the object or the verb. */
  | 'KR_CONSUMER_FORBIDDEN'
  /** The API server refused keyroll's credential (401): an expired token, a wrong kubeconfig. */
  | 'KR_CONSUMER_UNAUTHORIZED'
  /** The API server could not be reached or answered 5xx. */
  | 'KR_CONSUMER_UNREACHABLE'
  /** A request or a wait ran out of time (syncTimeout, rolloutTimeout, a request deadline). */
  | 'KR_CONSUMER_TIMEOUT'
  /** The object kept changing under keyroll's precondition (409) on every attempt. */
  | 'KR_CONSUMER_CONFLICT'
  /** Any other refusal (400, 422, …): the object is not what the policy says it is. */
  | 'KR_CONSUMER_REFUSED'
  /** The ExternalSecret reports it could not sync (its Ready condition False). */
  | 'KR_CONSUMER_SYNC_FAILED'
  /** The API server serves no version of external-secrets.io keyroll speaks (v1, v1beta1): external-secrets missing or too old. */
  | 'KR_CONSUMER_API_UNSERVED'
  /** The ExternalSecret's refresh settings switch force-sync off (refreshInterval 0, refreshPolicy CreatedOnce). */
  | 'KR_CONSUMER_FORCE_SYNC_OFF'
  /** A VaultStaticSecret with hmacSecretData: false: the operator records nothing that proves a sync. */
  | 'KR_CONSUMER_SYNC_UNPROVABLE'
  /** A workload not restarted because an ExternalSecret it reads did not sync: it would start on the old value. */
  | 'KR_CONSUMER_SYNC_BLOCKED'
  /** The rollout cannot complete on its own (progress deadline exceeded, OnDelete update strategy). */
  | 'KR_CONSUMER_ROLLOUT_FAILED'
  /** The webhook sink did not take the notice after its retries. */
  | 'KR_CONSUMER_WEBHOOK_FAILED'
  /** No Kubernetes client could be made (no in-cluster account, no kubeconfig, a bad context). */
  | 'KR_CONSUMER_NO_CLIENT';

export class ConsumerError extends KeyrollError {
  override name = 'ConsumerError';
  declare readonly code: ConsumerErrorCode;
  /** The HTTP status the API server answered, when it answered. */
  readonly status: number | undefined;

  constructor(code: ConsumerErrorCode, message: string, options: { status?: number; cause?: unknown } = {}) {
    super(code, message, {
      ...(options.cause === undefined ? {} : { cause: options.cause }),
      retryable: code === 'KR_CONSUMER_UNREACHABLE' || code === 'KR_CONSUMER_CONFLICT',
    });
    this.status = options.status;
  }

  override toFields(): Record<string, unknown> {
    return { ...super.toFields(), ...(this.status === undefined ? {} : { status: this.status }) };
  }
}

/** The code a Kubernetes API answer's HTTP status stands for. */
export function codeOfStatus(status: number): ConsumerErrorCode {
  if (status === 404) return 'KR_CONSUMER_NOT_FOUND';
  if (status === 403) return 'KR_CONSUMER_FORBIDDEN';
  if (status === 401) return 'KR_CONSUMER_UNAUTHORIZED';
  if (status === 409) return 'KR_CONSUMER_CONFLICT';
  if (status === 408 || status === 504) return 'KR_CONSUMER_TIMEOUT';
  if (status === 429 || status >= 500) return 'KR_CONSUMER_UNREACHABLE';
  return 'KR_CONSUMER_REFUSED';
}

/** Any failure as a ConsumerError (a foreign one is a network-level failure: unreachable). */
export function asConsumerError(error: unknown): ConsumerError {
  return error instanceof ConsumerError
    ? error
    : new ConsumerError('KR_CONSUMER_UNREACHABLE', errorMessage(error), { cause: error });
}
