// Which targets the Vault backend takes: a path under the KV v2 mount, without leading or trailing
// slashes, with no empty, `.` or `..` segment, that is not one of keyroll's own lock entries
// (`{path}.keyroll-lock`, lock.ts). Checked on every call, before any request.
import type { BackendOperation } from '../errors.ts';
import type { StoreTarget } from '../types.ts';
import { invalidTargetError } from './errors.ts';
import { isValidKvPath } from './kv.ts';
import { lockPathFor } from './lock.ts';

/** The KV path of `target`; throws KR_BACKEND_INVALID_TARGET when it is not a usable one. */
export function kvPathOf(target: StoreTarget, backend: string, operation: BackendOperation): string {
  const path = target.path.replace(/^\/+|\/+$/g, '');
  if (!isValidKvPath(path) || path.endsWith(lockPathFor('')))
    throw invalidTargetError(backend, operation, target.path);
  return path;
}
