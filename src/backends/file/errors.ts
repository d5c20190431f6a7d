// The file backend's errors: a filesystem error mapped to a BackendError (Node's fs errors name the
// syscall and the path, never file contents, so keeping them as `cause` is safe), and the errors the
// backend raises itself: a fenced write refused (invariant 9) and an unusable target.
import { BackendError, type BackendErrorCode, type BackendOperation } from '../errors.ts';
import { SidecarCorruptError } from './records.ts';

function codeForErrno(errno: string | undefined): BackendErrorCode {
  switch (errno) {
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
      return 'KR_BACKEND_DENIED';
    case 'ENOENT':
      return 'KR_BACKEND_NOT_FOUND';
    case 'EISDIR':
    case 'ENOTDIR':
    case 'ENAMETOOLONG':
    case 'ELOOP':
      return 'KR_BACKEND_INVALID_TARGET';
    case 'EAGAIN':
    case 'EBUSY':
    case 'EMFILE':
    case 'ENFILE':
      return 'KR_BACKEND_UNAVAILABLE';
    default:
      return 'KR_BACKEND_FAILED';
  }
}

export function fileBackendError(
  backend: string,
  operation: BackendOperation,
  path: string,
  error: unknown,
): BackendError {
  if (error instanceof BackendError) return error;
  if (error instanceof SidecarCorruptError) {
    return new BackendError(
      'KR_BACKEND_INVALID_RESPONSE',
      `file backend ${backend}: ${operation} of ${path}: ${error.message}`,
      {
        backend,
        kind: 'file',
        operation,
        path,
      },
    );
  }
  const errno = (error as NodeJS.ErrnoException | undefined)?.code;
  const code = codeForErrno(errno);
  return new BackendError(
    code,
    `file backend ${backend}: ${operation} of ${path} failed (${errno ?? 'error'})`,
    {
      backend,
      kind: 'file',
      operation,
      path,
      cause: error,
    },
  );
}

/** A fenced write whose lock was taken over or released (invariant 9): not retryable, nothing written. */
export function lockLostError(backend: string, targetPath: string): BackendError {
  return new BackendError(
    'KR_LOCK_LOST',
    `file backend ${backend}: write of ${JSON.stringify(targetPath)} refused, this runner no longer holds the key lock`,
    {
      backend,
      kind: 'file',
      operation: 'write',
      path: targetPath,
      retryable: false,
    },
  );
}

/** A target the backend cannot use (target.ts, or not a regular file); `problem` says why. */
export function invalidTargetError(
  backend: string,
  operation: BackendOperation,
  targetPath: string,
  problem: string,
): BackendError {
  return new BackendError(
    'KR_BACKEND_INVALID_TARGET',
    `file backend ${backend}: ${operation} of ${JSON.stringify(targetPath)}: ${problem}`,
    {
      backend,
      kind: 'file',
      operation,
      path: targetPath,
    },
  );
}
