// The write of a Vault destination and its read-back. The write after the roll is one check-and-set
// data write (invariant 2), against the version read under the lock: the fence (invariant 9; Vault
// has no transaction over two entries, so the lock entry cannot be checked in the data write
// itself). Only a write the server refused asks why, after the write: the lock entry tells whether
// a new holder wrote (this runner lost its lock) or someone outside keyroll's lock did. A retried
// write that already landed is found by its secret, unique to its roll (invariant 8).
import { parseStoredValue, renderMap } from '../render.ts';
import type { SecretRecord, StoreTarget, StoredSecret, WriteFence, WriteResult } from '../types.ts';
import { LOCK_LOST, refusedWriteError } from './errors.ts';
import type { KvData } from './kv.ts';
import { readLockEntry } from './lock.ts';
import { changeMetadata, META, writerOf, type RecordsContext } from './records.ts';
import { copiedFrom } from './takeover.ts';

/**
 * The bookkeeping a write leaves running per path (when no intent marker of this process already
 * names the version it wrote). writeSecret returns as soon as the secret is durable, so the
 * exposure window is the one data write, not that write plus the metadata change naming its
 * rotation; every later call on the path waits for this first, so the custom_metadata changes
 * never interleave and readers see what the write recorded.
 */
export class BookkeepingAfterWrites {
  readonly #running = new Map<string, Promise<void>>();

  /** The bookkeeping still running for `path`, if any. */
  running(path: string): Promise<void> | undefined {
    return this.#running.get(path);
  }

  /** Runs `change` in the background, best effort, until it ends. */
  track(path: string, change: Promise<void>): void {
    const tracked: Promise<void> = change
      .catch(() => undefined)
      .finally(() => {
        if (this.#running.get(path) === tracked) this.#running.delete(path);
      });
    this.#running.set(path, tracked);
  }

  async settleAll(): Promise<void> {
    await Promise.all(this.#running.values());
  }
}

export interface WriteContext extends RecordsContext {
  backend: string;
  bookkeeping: BookkeepingAfterWrites;
}

export async function writeSecret(
  context: WriteContext,
  path: string,
  target: StoreTarget,
  record: SecretRecord,
  fence?: WriteFence,
): Promise<WriteResult> {
  const { kv, backend } = context;
  const known = context.known.of(path);
  // A lock this process already knows it lost: refused with no request (invariant 9).
  if (fence !== undefined && known.hasLost(fence.lock.token))
    throw refusedWriteError(backend, path, 'KR_LOCK_LOST', LOCK_LOST);
  if (known.lastWroteFor(record.rotationId)) {
    const applied = await appliedVersion(context, path, target, record);
    if (applied !== undefined) return { version: String(applied), alreadyApplied: true };
  }
  let cas = known.expectedVersion;
  if (cas === undefined) {
    // A fenced write checks-and-sets against the version read under the lock, never against one
    // read now: that read could see a new holder's write, and the write would replace it.
    if (fence !== undefined)
      throw refusedWriteError(
        backend,
        path,
        'KR_LOCK_LOST',
        'no version of the secret was read under the lock',
      );
    // No preflight or lock in this process: look once (tests, direct callers).
    const current = await kv.readData(path, 'write');
    if (current !== undefined && holds(current, target, record))
      return { version: String(current.version), alreadyApplied: true };
    cas = current?.version ?? 0;
  }
  known.writingData();
  // `until-expiry`: a token past 2/3 of its TTL is not renewed here, before the write
  // (invariant 2); ensureFresh renewed it before the roll. Only an expired one is replaced.
  const written = await kv.writeData(path, renderMap(target.shape, record), cas, 'write', 'until-expiry');
  if (written === 'cas-mismatch') {
    // Either an earlier attempt of this write landed (its answer was lost) or someone else wrote.
    // Unfenced, a retry reads afresh. Fenced, the version read under the lock stays the base, so
    // a retry is refused the same way (invariant 9).
    if (fence === undefined) known.unfencedWriteRefused();
    const applied = await appliedVersion(context, path, target, record);
    if (applied !== undefined) return { version: String(applied), alreadyApplied: true };
    // Fenced: after the refused write, so no request comes before the write (invariant 2), the
    // lock says whether a new holder wrote (lost) or someone outside keyroll's lock did.
    if (fence !== undefined && (await whyFencedWriteRefused(context, path, fence)) === 'lock-lost') {
      known.lostLock(fence.lock.token);
      throw refusedWriteError(backend, path, 'KR_LOCK_LOST', LOCK_LOST);
    }
    throw refusedWriteError(
      backend,
      path,
      'KR_BACKEND_CONFLICT',
      `another writer changed it since version ${String(cas)}`,
    );
  }
  known.wroteSecret(record.rotationId, written.version);
  // This rotation's intent marker, durable before the roll, already names the version it wrote
  // (readSecret reads it there until the finish step records it): nothing to add now.
  if (known.markerAnnounced(record.rotationId, written.version)) {
    return { version: String(written.version), alreadyApplied: false };
  }
  // After the durable write, so it adds no I/O before it (invariant 2), and not awaited here, so
  // it adds no time to the exposure window either. Best effort: readSecret falls back to the
  // value itself, and the secret is already safe.
  context.bookkeeping.track(
    path,
    changeMetadata(
      context,
      path,
      () => ({
        [META.lastWriteRotationId]: record.rotationId,
        [META.lastWriteVersion]: String(written.version),
      }),
      'write',
    ),
  );
  return { version: String(written.version), alreadyApplied: false };
}

export async function readSecret(
  context: RecordsContext,
  path: string,
  target: StoreTarget,
): Promise<StoredSecret | undefined> {
  const current = await context.kv.readData(path, 'read');
  if (current?.data === undefined) return undefined;
  const parsed = parseStoredValue(target.shape, current.data);
  if (parsed === undefined) return undefined;
  const rotationId = parsed.rotationId ?? writerOf(current.customMetadata, current.version);
  return {
    secret: parsed.secret,
    version: String(current.version),
    ...(rotationId === undefined ? {} : { rotationId }),
  };
}

/**
 * The value the latest write replaced (a two-slot entry's standby secret, invariant 10): the
 * version before the current one, or before the version the current one copies when it is a
 * takeover's copy (takeover.ts: a copy replaced nothing). Two reads, the metadata for the current
 * version number and the copy record (it carries no secret, so the current secret is not fetched
 * for nothing), then that version's data. Undefined when there is none, or it was deleted,
 * destroyed or dropped by `max_versions`.
 */
export async function readPrevious(
  context: RecordsContext,
  path: string,
  target: StoreTarget,
): Promise<StoredSecret | undefined> {
  const metadata = await context.kv.readMetadata(path, 'read');
  if (metadata === undefined) return undefined;
  const before =
    (copiedFrom(metadata.customMetadata, metadata.currentVersion) ?? metadata.currentVersion) - 1;
  if (before < 1) return undefined;
  const previous = await context.kv.readData(path, 'read', before);
  if (previous?.data === undefined) return undefined;
  const parsed = parseStoredValue(target.shape, previous.data);
  if (parsed === undefined) return undefined;
  const rotationId = parsed.rotationId ?? writerOf(metadata.customMetadata, previous.version);
  return {
    secret: parsed.secret,
    version: String(previous.version),
    ...(rotationId === undefined ? {} : { rotationId }),
    ...(parsed.keyId === undefined ? {} : { keyId: parsed.keyId }),
  };
}

/** Why a fenced check-and-set was refused (not by this rotation's own earlier write): the lock moved on, or someone outside keyroll wrote. */
async function whyFencedWriteRefused(
  context: RecordsContext,
  path: string,
  fence: WriteFence,
): Promise<'lock-lost' | 'conflict'> {
  const entry = await readLockEntry(context.kv, path, 'write');
  return entry.lock?.token === fence.lock.token ? 'conflict' : 'lock-lost';
}

/** The version now holding this record's secret, if the latest version does. */
async function appliedVersion(
  context: RecordsContext,
  path: string,
  target: StoreTarget,
  record: SecretRecord,
): Promise<number | undefined> {
  const current = await context.kv.readData(path, 'write');
  if (current === undefined || !holds(current, target, record)) return undefined;
  context.known.of(path).foundWriteApplied(current.version);
  return current.version;
}

/** The secret is unique to its roll, so finding it stored means this rotation's write landed. */
function holds(current: KvData, target: StoreTarget, record: SecretRecord): boolean {
  if (current.data === undefined) return false;
  return parseStoredValue(target.shape, current.data)?.secret.equals(record.secret) === true;
}
