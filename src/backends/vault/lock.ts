// The key lock of a Vault destination (invariant 5): a separate KV entry `{path}.keyroll-lock`
// whose data names the holder. Every change is a check-and-set write against a version whose
// content is known (0 = create only), so of two runners racing only one write lands; the other
// re-reads and sees the winner. A stale lock (past expiresAt) is taken over the same way, and a
// release writes a `released` version with check-and-set, so a lock taken over meanwhile stays
// intact. The version is the one just read, or one whose content this process knows without
// reading: the lock it holds (its refresh and release) or, for a path never written, none at all
// (version 0, create only). The write checks it all the same, so knowledge that is out of date
// costs one refused write and a read, never a lock taken from its holder.
// A lock write whose answer is lost (timeout, reset, 5xx) may have landed: the entry is read
// back, and a lock carrying this attempt's random token is ours and returned as acquired, so a
// caller never holds a lock it does not know about (and never leaves one behind for a TTL).
// Invariant 9: another owner's lock is stale only once now >= expiresAt + clockSkewMs by keyroll's
// clock (or at once when its owner was proven dead: LockRequest.deadOwners); a refresh extends the
// lock only while the entry still carries the holder's token (a check-and-set write keeping that
// token), and never writes an entry that is released or gone.
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

export interface LockEntry {
  /** Version to check-and-set against (0 when the entry never existed). */
  version: number;
  /** The holder, when a lock is held (released or unreadable entries are free). */
  lock: LockData | undefined;
}

/** An entry holding a lock this process wrote. */
export interface HeldEntry {
  version: number;
  lock: LockData;
}

type AcquireResult =
  /** `entry`: the version now holding the lock; `unread`: written against `known` without reading. */
  | { acquired: true; outcome: Extract<LockOutcome, { acquired: true }>; entry: HeldEntry; unread: boolean }
  /** `entry`: the entry as last read, when one was. */
  | { acquired: false; outcome: Extract<LockOutcome, { acquired: false }>; entry: LockEntry | undefined };

export async function readLockEntry(
  kv: KvV2,
  path: string,
  operation: 'lock' | 'unlock' | 'state' | 'write',
): Promise<LockEntry> {
  const entry = await kv.readData(lockPathFor(path), operation);
  if (entry === undefined) return { version: 0, lock: undefined };
  const parsed = LockData.safeParse(entry.data);
  return {
    version: entry.version,
    lock: parsed.success && parsed.data.state === 'held' ? parsed.data : undefined,
  };
}

function info(lock: LockData): LockInfo {
  return { owner: lock.owner, rotationId: lock.rotationId, expiresAt: lock.expiresAt };
}

export function lockInfo(entry: LockEntry | undefined): LockInfo | undefined {
  return entry?.lock === undefined ? undefined : info(entry.lock);
}

/**
 * Takes the lock, or refreshes it for the same owner and rotation. `known` is an entry whose
 * content at its version the caller knows (the lock it holds; version 0 for an entry that most
 * likely does not exist): the first round writes against it instead of reading, which is safe
 * because the write checks that version (a changed entry refuses it, and the next round reads).
 * Only a refusal is never based on it: a known entry held by another owner is read again.
 */
export async function acquireVaultLock(
  kv: KvV2,
  path: string,
  request: LockRequest,
  now: Date,
  known?: LockEntry,
): Promise<AcquireResult> {
  const mine: LockData = {
    owner: request.owner,
    rotationId: request.rotationId,
    expiresAt: new Date(now.getTime() + request.ttlMs).toISOString(),
    token: randomBytes(12).toString('hex'),
    state: 'held',
  };
  let guess = known;
  let entry: LockEntry | undefined;
  // A few rounds: every lost check-and-set means another runner changed the entry; re-read it.
  for (let round = 0; round < 5; round++) {
    const unread = guess !== undefined;
    entry = guess ?? (await readLockEntry(kv, path, 'lock'));
    guess = undefined;
    const { version, lock } = entry;
    let tookOver = false;
    if (lock !== undefined) {
      const sameHolder = lock.owner === request.owner && lock.rotationId === request.rotationId;
      const expiry = Date.parse(lock.expiresAt);
      // A holder proven dead (LockRequest.deadOwners) is taken over as a stale one is.
      const stale =
        Number.isNaN(expiry) ||
        expiry + (request.clockSkewMs ?? 0) <= now.getTime() ||
        (request.deadOwners?.includes(lock.owner) ?? false);
      if (!sameHolder && !stale) {
        if (unread) continue;
        return { acquired: false, outcome: { acquired: false, holder: info(lock) }, entry };
      }
      tookOver = !sameHolder;
    }
    const held: HeldLock = { ...info(mine), token: mine.token, tookOver };
    let written: Awaited<ReturnType<KvV2['writeData']>>;
    try {
      written = await kv.writeData(lockPathFor(path), { ...mine }, version, 'lock');
    } catch (error) {
      const landedAt = await landed(kv, path, mine, error);
      if (landedAt !== undefined)
        return {
          acquired: true,
          outcome: { acquired: true, lock: held },
          entry: { version: landedAt, lock: mine },
          unread: false,
        };
      throw error;
    }
    if (written !== 'cas-mismatch')
      return {
        acquired: true,
        outcome: { acquired: true, lock: held },
        entry: { version: written.version, lock: mine },
        unread,
      };
  }
  return { acquired: false, outcome: { acquired: false, holder: info(entry?.lock ?? mine) }, entry };
}

/**
 * The entry's version when a lock write that failed with an unknown outcome (timeout, reset,
 * 5xx, an answer that could not be read) did land: the entry now carries this attempt's token.
 * A read-back that fails too counts as not landed; the caller's retry with the same owner and
 * rotation then finds its own lock and takes it again.
 */
async function landed(kv: KvV2, path: string, mine: LockData, error: unknown): Promise<number | undefined> {
  const unknownOutcome =
    !(error instanceof BackendError) ||
    ['KR_BACKEND_TIMEOUT', 'KR_BACKEND_UNAVAILABLE', 'KR_BACKEND_INVALID_RESPONSE'].includes(error.code);
  if (!unknownOutcome) return undefined;
  try {
    const entry = await readLockEntry(kv, path, 'lock');
    return entry.lock?.token === mine.token ? entry.version : undefined;
  } catch {
    return undefined;
  }
}

/** True when `entry` holds exactly the lock `held` took (same holder and token, not released). */
function carries(entry: LockData | undefined, held: HeldLock): entry is LockData {
  return (
    entry !== undefined &&
    entry.token === held.token &&
    entry.owner === held.owner &&
    entry.rotationId === held.rotationId
  );
}

/**
 * Extends `held` to `ttlMs` from `now`, keeping its token, only while the entry still carries it:
 * the entry version now holding the refreshed lock, and whether it was written against `known`
 * without a read (then the lock never left this process since that write). Undefined when the
 * lock is released, gone or someone else's: nothing is written then (a lost lock is never
 * re-created, invariant 9). A write whose answer is lost throws; the caller's lock is unproven
 * and its next refresh reads the entry.
 */
export async function refreshVaultLock(
  kv: KvV2,
  path: string,
  held: HeldLock,
  ttlMs: number,
  now: Date,
  known?: HeldEntry,
): Promise<{ entry: HeldEntry; unread: boolean } | undefined> {
  const next: LockData = {
    owner: held.owner,
    rotationId: held.rotationId,
    token: held.token,
    expiresAt: new Date(now.getTime() + ttlMs).toISOString(),
    state: 'held',
  };
  if (known !== undefined && carries(known.lock, held)) {
    const written = await kv.writeData(lockPathFor(path), { ...next }, known.version, 'lock');
    if (written !== 'cas-mismatch') return { entry: { version: written.version, lock: next }, unread: true };
  }
  // A few rounds: a lost check-and-set while the entry still carries our token is a write of ours
  // whose answer was lost, or knowledge out of date; read and try again.
  for (let round = 0; round < 3; round++) {
    const entry = await readLockEntry(kv, path, 'lock');
    if (!carries(entry.lock, held)) return undefined;
    const written = await kv.writeData(lockPathFor(path), { ...next }, entry.version, 'lock');
    if (written !== 'cas-mismatch') return { entry: { version: written.version, lock: next }, unread: false };
  }
  return undefined;
}

/**
 * Releases `held` if the entry still carries its token. `known` is the entry as this process
 * wrote it when it took or refreshed the lock: writing against its version is the same check as
 * reading first (the entry is still exactly this holder's lock), so the read is skipped; a refused
 * write reads to decide (taken over meanwhile: not ours to release).
 */
export async function releaseVaultLock(
  kv: KvV2,
  path: string,
  held: HeldLock,
  known?: HeldEntry,
): Promise<void> {
  if (known !== undefined && known.lock.token === held.token) {
    const written = await kv.writeData(
      lockPathFor(path),
      { ...known.lock, state: 'released' },
      known.version,
      'unlock',
    );
    if (written !== 'cas-mismatch') return;
  }
  for (let round = 0; round < 3; round++) {
    const { version, lock } = await readLockEntry(kv, path, 'unlock');
    // Gone, released, or taken over by another runner: not ours to release.
    if (lock?.token !== held.token) return;
    const written = await kv.writeData(lockPathFor(path), { ...lock, state: 'released' }, version, 'unlock');
    if (written !== 'cas-mismatch') return;
  }
}
