// The errors the Vault backend raises itself, outside its HTTP client (client.ts maps every answer
// and transport failure): a fenced write refused (invariant 9) and a target that is no usable KV
// path. Like every BackendError, they name the backend, the operation and the path, never a value.
import { BackendError, type BackendOperation } from '../errors.ts';

export const LOCK_LOST = 'this runner no longer holds the key lock';

/** The write refused: `KR_LOCK_LOST` (this runner no longer holds the lock) or `KR_BACKEND_CONFLICT`; neither is retryable. */
export function refusedWriteError(
  backend: string,
  path: string,
  code: 'KR_LOCK_LOST' | 'KR_BACKEND_CONFLICT',
  why: string,
): BackendError {
  const verb = code === 'KR_LOCK_LOST' ? 'refused' : 'failed';
  return new BackendError(code, `vault backend ${backend}: write of ${path} ${verb}, ${why}`, {
    backend,
    kind: 'vault',
    operation: 'write',
    path,
    retryable: false,
    ...(code === 'KR_BACKEND_CONFLICT' ? { status: 400 } : {}),
  });
}

/** A target path that is not a usable KV path (target.ts). */
export function invalidTargetError(
  backend: string,
  operation: BackendOperation,
  targetPath: string,
): BackendError {
  return new BackendError(
    'KR_BACKEND_INVALID_TARGET',
    `vault backend ${backend}: ${operation} of ${JSON.stringify(targetPath)} failed, not a usable KV path`,
    {
      backend,
      kind: 'vault',
      operation,
      path: targetPath,
    },
  );
}
