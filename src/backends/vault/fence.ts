// The fence of a Vault write (invariant 9). Vault has no transaction over two entries, so the
// lock entry cannot be checked in the data write itself: the data version read under the lock is
// the fence (check-and-set), and only a write that the server refused asks the lock entry why,
// after the write, so nothing comes before the write (invariant 2).
import { BackendError } from '../errors.ts';
import type { WriteFence } from '../types.ts';
import type { KvV2 } from './kv.ts';
import { readLockEntry } from './lock.ts';

/** Why a fenced check-and-set was refused (not by this rotation's own earlier write): the lock moved on, or someone outside keyroll wrote. */
export async function whyFencedWriteRefused(kv: KvV2, path: string, fence: WriteFence): Promise<'lock-lost' | 'conflict'> {
  const entry = await readLockEntry(kv, path, 'write');
  return entry.lock?.token === fence.lock.token ? 'conflict' : 'lock-lost';
}

/** The write refused: `KR_LOCK_LOST` (this runner no longer holds the lock) or `KR_BACKEND_CONFLICT`; neither is retryable. */
export function refusedWriteError(backend: string, path: string, code: 'KR_LOCK_LOST' | 'KR_BACKEND_CONFLICT', why: string): BackendError {
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

export const LOCK_LOST = 'this runner no longer holds the key lock';
