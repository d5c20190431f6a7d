// The fence of a Vault write (invariant 9). Vault has no transaction over two entries, so the
// lock entry cannot be checked in the data write itself: the data version read under the lock is
// the fence (check-and-set), and only a write that the server refused asks the lock entry why,
// after the write, so nothing comes before the write (invariant 2).
import type { WriteFence } from '../types.ts';
import type { KvV2 } from './kv.ts';
import { readLockEntry } from './lock.ts';

/** Why a fenced check-and-set was refused (not by this rotation's own earlier write): the lock moved on, or someone outside keyroll wrote. */
export async function whyFencedWriteRefused(kv: KvV2, path: string, fence: WriteFence): Promise<'lock-lost' | 'conflict'> {
  const entry = await readLockEntry(kv, path, 'write');
  return entry.lock?.token === fence.lock.token ? 'conflict' : 'lock-lost';
}
