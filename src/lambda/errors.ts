// Errors of the AWS-native rotation function (src/lambda/). Secrets Manager sees any thrown error
// as a failed step and retries it; the message is what AWS records (CloudWatch), so it never holds
// a secret and always says what happens next.
import { KeyrollError } from '../errors.ts';

export type NativeRotationErrorCode =
  /** The event is not a rotation event keyroll understands. */
  | 'KR_NATIVE_EVENT_INVALID'
  /** No key of the policy is rotated natively at this secret, or the entry may not be. */
  | 'KR_NATIVE_NOT_CONFIGURED'
  /** The event's secret ARN has an entry's name but another partition, region or account than its destination. */
  | 'KR_NATIVE_ARN_MISMATCH'
  /** The rotation's new value is not (or no longer) at the version AWS names. */
  | 'KR_NATIVE_NO_PENDING'
  /** createSecret decided not to roll (min interval, consumerRefresh, another runner's lock). */
  | 'KR_NATIVE_NOT_ROLLED'
  /** The value a repeated createSecret should find was never stored; it is not rolled again. */
  | 'KR_NATIVE_VALUE_LOST'
  /** testSecret: the API refuses the new value. */
  | 'KR_NATIVE_PENDING_REJECTED'
  /** keyroll's own API credential could not be read from the secret KEYROLL_API_TOKEN_SECRET_ARN names. */
  | 'KR_NATIVE_API_CREDENTIAL_UNREADABLE'
  /** finishSecret: the key lock of this rotation is held by another runner now. */
  | 'KR_LOCK_LOST';

export class NativeRotationError extends KeyrollError {
  override name = 'NativeRotationError';
  constructor(code: NativeRotationErrorCode, message: string, options: { cause?: unknown } = {}) {
    super(code, message, options);
  }
}

/** Errors a step already audited as key.failed and alerted (the engine's reportFailure): the handler does not audit them twice. */
export const reportedErrors = new WeakSet<object>();
