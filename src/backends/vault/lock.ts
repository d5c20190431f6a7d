// The key lock of a Vault destination (invariant 5): a separate KV entry `{path}.keyroll-lock`
// whose data names the holder. Every change is a check-and-set write against the version just
// read (0 = create only), so of two runners racing only one write lands; the other re-reads and
// sees the winner. A stale lock (past expiresAt) is taken over the same way, and a release
// writes a `released` version with check-and-set, so a lock taken over meanwhile stays intact.
// A lock write whose answer is lost (timeout, reset, 5xx) may have landed: the entry is read
// back, and a lock carrying this attempt's random token is ours and returned as acquired, so a
// caller never holds a lock it does not know about (and never leaves one behind for a TTL).
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { BackendError } from '../errors.ts';
import type { HeldLock, LockInfo, LockOutcome, LockRequest } from '../types.ts';
import type { KvV2 } from './kv.ts';

export const LOCK_SUFFIX = '.keyroll-lock';

export function lockPathFor(path: string): string {
  return `${path}${LOCK_SUFFIX}`;
}

const LockData = z.object({
  owner: z.string(),
  rotationId: z.string(),
  expiresAt: z.string(),
  token: z.string(),
  state: z.enum(['held', 'released']),
});
type LockData = z.infer<typeof LockData>;

interface LockEntry {
  /** Version to check-and-set against (0 when the entry never existed). */
  version: number;
  /** The holder, when a lock is held (released or unreadable entries are free). */
  lock: LockData | undefined;
}

async function readLockEntry(kv: KvV2, path: string, operation: 'lock' | 'unlock' | 'state'): Promise<LockEntry> {
  const entry = await kv.readData(lockPathFor(path), operation);
  if (entry === undefined) return { version: 0, lock: undefined };
  const parsed = LockData.safeParse(entry.data);
  return { version: entry.version, lock: parsed.success && parsed.data.state === 'held' ? parsed.data : undefined };
}

function info(lock: LockData): LockInfo {
  return { owner: lock.owner, rotationId: lock.rotationId, expiresAt: lock.expiresAt };
}

export async function readVaultLock(kv: KvV2, path: string): Promise<LockInfo | undefined> {
  const { lock } = await readLockEntry(kv, path, 'state');
  return lock === undefined ? undefined : info(lock);
}

export async function acquireVaultLock(kv: KvV2, path: string, request: LockRequest, now: Date): Promise<LockOutcome> {
  const mine: LockData = {
    owner: request.owner,
    rotationId: request.rotationId,
    expiresAt: new Date(now.getTime() + request.ttlMs).toISOString(),
    token: randomBytes(12).toString('hex'),
    state: 'held',
  };
  let last: LockData | undefined;
  // A few rounds: every lost check-and-set means another runner changed the entry; re-read it.
  for (let round = 0; round < 5; round++) {
    const { version, lock } = await readLockEntry(kv, path, 'lock');
    last = lock;
    let tookOver = false;
    if (lock !== undefined) {
      const sameHolder = lock.owner === request.owner && lock.rotationId === request.rotationId;
      const expiry = Date.parse(lock.expiresAt);
      const stale = Number.isNaN(expiry) || expiry <= now.getTime();
      if (!sameHolder && !stale) return { acquired: false, holder: info(lock) };
      tookOver = !sameHolder;
    }
    const held: HeldLock = { ...info(mine), token: mine.token, tookOver };
    let written: Awaited<ReturnType<KvV2['writeData']>>;
    try {
      written = await kv.writeData(lockPathFor(path), { ...mine }, version, 'lock');
    } catch (error) {
      if (await landed(kv, path, mine, error)) return { acquired: true, lock: held };
      throw error;
    }
    if (written !== 'cas-mismatch') return { acquired: true, lock: held };
  }
  return { acquired: false, holder: info(last ?? mine) };
}

/**
 * True when a lock write that failed with an unknown outcome (timeout, reset, 5xx, an answer
 * that could not be read) did land: the entry now carries this attempt's token. A read-back that
 * fails too counts as not landed; the caller's retry with the same owner and rotation then
 * finds its own lock and takes it again.
 */
async function landed(kv: KvV2, path: string, mine: LockData, error: unknown): Promise<boolean> {
  const unknownOutcome = !(error instanceof BackendError) || ['KR_BACKEND_TIMEOUT', 'KR_BACKEND_UNAVAILABLE', 'KR_BACKEND_INVALID_RESPONSE'].includes(error.code);
  if (!unknownOutcome) return false;
  try {
    return (await readLockEntry(kv, path, 'lock')).lock?.token === mine.token;
  } catch {
    return false;
  }
}

export async function releaseVaultLock(kv: KvV2, path: string, held: HeldLock): Promise<void> {
  for (let round = 0; round < 3; round++) {
    const { version, lock } = await readLockEntry(kv, path, 'unlock');
    // Gone, released, or taken over by another runner: not ours to release.
    if (lock?.token !== held.token) return;
    const written = await kv.writeData(lockPathFor(path), { ...lock, state: 'released' }, version, 'unlock');
    if (written !== 'cas-mismatch') return;
  }
}
