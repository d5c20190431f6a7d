// Maps a filesystem error to a BackendError. Node's fs errors name the syscall and the path,
// never file contents, so keeping them as `cause` is safe.
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

export function fileBackendError(backend: string, operation: BackendOperation, path: string, error: unknown): BackendError {
  if (error instanceof BackendError) return error;
  if (error instanceof SidecarCorruptError) {
    return new BackendError('KR_BACKEND_INVALID_RESPONSE', `file backend ${backend}: ${operation} of ${path}: ${error.message}`, {
      backend,
      kind: 'file',
      operation,
      path,
    });
  }
  const errno = (error as NodeJS.ErrnoException | undefined)?.code;
  const code = codeForErrno(errno);
  return new BackendError(code, `file backend ${backend}: ${operation} of ${path} failed (${errno ?? 'error'})`, {
    backend,
    kind: 'file',
    operation,
    path,
    cause: error,
  });
}
