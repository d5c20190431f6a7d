// Maps what the AWS SDK throws to a BackendError with a stable code. SDK errors are matched
// by name (the service's exception names are its documented API), then by HTTP status, then
// as transport failures. The message is fixed text built from the operation and the path.
import { BackendError, codeForTransportError, describeCode } from '../errors.ts';
import type { BackendErrorCode, BackendOperation } from '../errors.ts';

/** The Secrets Manager API calls keyroll makes (the names the IAM policy must allow). */
export type AwsAction =
  | 'DescribeSecret'
  | 'GetSecretValue'
  | 'PutSecretValue'
  | 'CreateSecret'
  | 'UpdateSecretVersionStage'
  | 'TagResource'
  | 'ListSecretVersionIds'
  | 'RotateSecret'
  | 'CancelRotateSecret';

/**
 * Calls whose request or successful response carries a secret value. Their errors keep no
 * `cause` and no AWS message (invariant 3): an SDK error can echo its input, and a
 * deserialization error keeps the raw response body. Only the name and status survive.
 */
const CARRIES_SECRET: ReadonlySet<AwsAction> = new Set(['PutSecretValue', 'CreateSecret', 'GetSecretValue']);

const BY_NAME: Readonly<Record<string, BackendErrorCode>> = {
  ResourceNotFoundException: 'KR_BACKEND_NOT_FOUND',
  AccessDeniedException: 'KR_BACKEND_DENIED',
  AccessDenied: 'KR_BACKEND_DENIED',
  UnrecognizedClientException: 'KR_BACKEND_DENIED',
  InvalidSignatureException: 'KR_BACKEND_DENIED',
  SignatureDoesNotMatch: 'KR_BACKEND_DENIED',
  ExpiredTokenException: 'KR_BACKEND_DENIED',
  InvalidClientTokenId: 'KR_BACKEND_DENIED',
  // No credentials anywhere in the default chain (no env, no IRSA token, no instance role).
  CredentialsProviderError: 'KR_BACKEND_DENIED',
  // KMS refused to encrypt or decrypt with the secret's key: almost always a key policy or grant.
  EncryptionFailure: 'KR_BACKEND_DENIED',
  DecryptionFailure: 'KR_BACKEND_DENIED',
  // A ClientRequestToken reused with a different value, or a name already taken.
  ResourceExistsException: 'KR_BACKEND_CONFLICT',
  // Over the account's request quota (src/backends/aws/pacing.ts waits these out first).
  ThrottlingException: 'KR_BACKEND_THROTTLED',
  TooManyRequestsException: 'KR_BACKEND_THROTTLED',
  RequestLimitExceeded: 'KR_BACKEND_THROTTLED',
  InternalServiceError: 'KR_BACKEND_UNAVAILABLE',
  InternalFailure: 'KR_BACKEND_UNAVAILABLE',
  ServiceUnavailable: 'KR_BACKEND_UNAVAILABLE',
  TimeoutError: 'KR_BACKEND_TIMEOUT',
  RequestTimeout: 'KR_BACKEND_TIMEOUT',
  RequestTimeoutException: 'KR_BACKEND_TIMEOUT',
};

/**
 * What AWS (InvalidRequestException) and moto say about a secret scheduled for deletion:
 * "You can't perform this operation on the secret because it was marked for deletion", "...
 * because a secret with this name is already scheduled for deletion", "...currently marked
 * deleted". Matched on the message, which itself is never kept (it may echo a request).
 */
const SCHEDULED_FOR_DELETION = /marked (for )?delet|scheduled for deletion/i;

function isScheduledForDeletion(error: unknown, name: string): boolean {
  return (
    name === 'InvalidRequestException' && error instanceof Error && SCHEDULED_FOR_DELETION.test(error.message)
  );
}

/** Hints for the operator, by code, appended to the fixed message. */
function hint(code: BackendErrorCode, action: AwsAction, awsName: string): string {
  if (code === 'KR_BACKEND_SCHEDULED_FOR_DELETION')
    return ': restore it first (aws secretsmanager restore-secret); its name stays reserved until then';
  if (awsName === 'EncryptionFailure' || awsName === 'DecryptionFailure') {
    return ': the KMS key of the secret refused the request (check kms:GenerateDataKey / kms:Decrypt for keyroll)';
  }
  if (awsName === 'CredentialsProviderError')
    return ': no AWS credentials found in the default chain (env, IRSA, profile, instance role)';
  if (awsName === REGION_MISSING)
    return ': no AWS region (set `region` in the backend config, or AWS_REGION)';
  if (code === 'KR_BACKEND_DENIED') return `: keyroll needs secretsmanager:${action}`;
  if (code === 'KR_BACKEND_VERSION_QUOTA')
    return ': the secret has as many versions as AWS keeps (versions younger than 24 h are never removed); wait for the oldest to age, and look for what writes it so often';
  return '';
}

export interface AwsErrorContext {
  backend: string;
  operation: BackendOperation;
  action: AwsAction;
  /** The secret name or ARN the call addressed (the target or its lock companion). */
  path: string;
}

interface SdkErrorShape {
  name: string;
  $metadata?: { httpStatusCode?: number };
}

function isSdkError(error: unknown): error is Error & SdkErrorShape {
  return error instanceof Error;
}

// The SDK throws a plain Error with this message when neither config, env nor profile gives a region.
const REGION_MISSING = 'RegionMissing';

/** The AWS error name ("AccessDeniedException"), or the error's name for foreign errors. */
export function awsErrorName(error: unknown): string {
  if (!isSdkError(error)) return 'UnknownError';
  if (error.name === 'Error' && error.message === 'Region is missing') return REGION_MISSING;
  return error.name;
}

export function awsHttpStatus(error: unknown): number | undefined {
  return isSdkError(error) ? error.$metadata?.httpStatusCode : undefined;
}

function codeFor(
  error: unknown,
  name: string,
  status: number | undefined,
  action: AwsAction,
): BackendErrorCode {
  if (isScheduledForDeletion(error, name)) return 'KR_BACKEND_SCHEDULED_FOR_DELETION';
  // A new version would pass the secret's version quota (AWS: no more than 100 versions, and none
  // created in the last 24 h is removed to make room): not retryable, only time frees it.
  if (name === 'LimitExceededException' && action === 'PutSecretValue') return 'KR_BACKEND_VERSION_QUOTA';
  const byName = BY_NAME[name];
  if (byName !== undefined) return byName;
  const transport = codeForTransportError(error);
  if (transport !== undefined) return transport;
  if (status !== undefined) {
    // An answer the SDK could not parse (an emulator's XML AccessDenied, a proxy's HTML page)
    // still has a status that says what happened.
    if (status === 401 || status === 403) return 'KR_BACKEND_DENIED';
    if (status === 404) return 'KR_BACKEND_NOT_FOUND';
    if (status === 429) return 'KR_BACKEND_THROTTLED';
    if (status >= 500) return 'KR_BACKEND_UNAVAILABLE';
    if (name === 'SyntaxError' || name.includes('Deserialization')) return 'KR_BACKEND_INVALID_RESPONSE';
    return 'KR_BACKEND_FAILED';
  }
  return 'KR_BACKEND_FAILED';
}

/** A BackendError for an error thrown by one SDK call. */
export function toBackendError(error: unknown, context: AwsErrorContext): BackendError {
  if (error instanceof BackendError) return error;
  const name = awsErrorName(error);
  const status = awsHttpStatus(error);
  const code = codeFor(error, name, status, context.action);
  const keepCause = !CARRIES_SECRET.has(context.action);
  const message = `aws ${context.action} on ${context.path}: ${describeCode(code)} (${name}${status === undefined ? '' : ` ${status}`})${hint(code, context.action, name)}`;
  return new BackendError(code, message, {
    backend: context.backend,
    kind: 'aws',
    operation: context.operation,
    path: context.path,
    ...(status === undefined ? {} : { status }),
    ...(keepCause ? { cause: error } : {}),
  });
}

/** True when `error` is the named AWS exception (before mapping). */
export function isAwsError(error: unknown, name: string): boolean {
  return awsErrorName(error) === name;
}
