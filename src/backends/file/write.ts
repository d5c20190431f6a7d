// The write of a value file after the roll (invariant 2: its first I/O is the write itself).
// Unfenced: the atomic write alone (temp, fsync, rename, fsync of the directory). Fenced
// (invariant 9): the same, but the value is written into the takeover guard's holder directory and
// renamed into place under the guard, only while the lock file still carries the writer's token,
// so a runner whose lock was taken over never replaces what the new holder stored, not even one
// paused between its check and its rename (takeover-guard.ts). After the durable write: the value
// it replaced is kept (previous.ts) and the write recorded in the sidecar, neither of which can fail
// the write. A retried write that already landed is found by its secret, unique to its roll
// (invariant 8). The read-back is here too.
import { mkdir, stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { parseStoredValue, renderValue } from '../render.ts';
import type { HeldLock, SecretRecord, StoreTarget, StoredSecret, WriteFence, WriteResult } from '../types.ts';
import { DIRECTORY_MODE, syncDirectory, writeFileAtomic } from './atomic.ts';
import { fileBackendError, lockLostError } from './errors.ts';
import { placeWhileFileLockHeld } from './lock.ts';
import { keepReplacedValue, readReplacedValue } from './previous.ts';
import { bumpVersion, readSidecar, updateSidecar, type RecordsContext } from './records.ts';
import { readStoredValue } from './stored-value.ts';

export interface WriteContext extends RecordsContext {
  backend: string;
}

export async function writeSecret(
  context: WriteContext,
  file: string,
  target: StoreTarget,
  record: SecretRecord,
  fence?: WriteFence,
): Promise<WriteResult> {
  const digest = record.secret.digest();
  // Idempotent retry (invariant 8): the secret is unique to its roll, so finding it stored
  // means an earlier attempt landed. Only a retry looks: the first attempt's only I/O is
  // the atomic write itself (invariant 2).
  if (context.known.writeAttempted(file, record.rotationId)) {
    const stored = await readStoredValue(file, target.shape);
    if (stored?.secret.equals(record.secret) === true) {
      const sidecar = await readSidecar(file).catch(() => undefined);
      if (sidecar?.lastWrite?.rotationId === record.rotationId && sidecar.lastWrite.digest === digest) {
        // The earlier attempt may have ended before it kept the replaced value.
        const kept = await keepReplaced(context, file, target);
        return {
          version: String(sidecar.lastWrite.version),
          alreadyApplied: true,
          ...(kept === undefined ? {} : { bookkeepingError: kept }),
        };
      }
      return afterWrite(context, file, target, record, true);
    }
  }
  const value = renderValue(target.shape, record);
  const content = typeof value === 'string' ? value : `${JSON.stringify(value, null, 2)}\n`;
  if (fence === undefined) await writeValueDurably(file, content);
  else if ((await writeValueFenced(file, content, fence.lock)) === 'lost')
    throw lockLostError(context.backend, target.path);
  return afterWrite(context, file, target, record, false);
}

export async function readSecret(
  context: RecordsContext,
  file: string,
  target: StoreTarget,
): Promise<StoredSecret | undefined> {
  const stored = await readStoredValue(file, target.shape);
  if (stored === undefined) return undefined;
  // The value is what counts; bookkeeping that is missing, stale or unreadable only costs
  // the version number (its mtime stands in) and, for raw values, the rotation id.
  const sidecar = await readSidecar(file).catch(() => undefined);
  const digest = stored.secret.digest();
  const ours = sidecar?.lastWrite !== undefined && sidecar.lastWrite.digest === digest;
  const result: StoredSecret = { secret: stored.secret };
  // A value edited by hand since our last write has no version of ours; its mtime stands in.
  result.version = ours ? String(sidecar.lastWrite?.version) : `mtime-${String(stored.mtimeMs)}`;
  const unrecorded = context.known.unrecordedWrite(file);
  const rotationId =
    stored.rotationId ??
    (ours
      ? sidecar.lastWrite?.rotationId
      : unrecorded?.digest === digest
        ? unrecorded.rotationId
        : undefined);
  if (rotationId !== undefined) result.rotationId = rotationId;
  return result;
}

/** The value the latest write replaced (a two-slot entry's standby secret, invariant 10; previous.ts). */
export async function readPrevious(file: string, target: StoreTarget): Promise<StoredSecret | undefined> {
  const text = await readReplacedValue(file);
  return text === undefined ? undefined : parseStoredValue(target.shape, text);
}

/**
 * The atomic write of the value, nothing before it: preflight and the lock created the directory.
 * Only a write that finds no directory (a caller that skipped both) creates it and writes again.
 */
export async function writeValueDurably(file: string, content: string): Promise<void> {
  try {
    await writeFileAtomic(file, content);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    await mkdir(dirname(file), { recursive: true, mode: DIRECTORY_MODE });
    await writeFileAtomic(file, content);
  }
}

/**
 * The fenced write: 'lost' (nothing visible changed) when the lock file no longer carries `lock`'s
 * token. The value is written and fsynced inside the takeover guard's holder directory before the
 * guard is taken, so the guard is held for one read and one rename, and a rename whose guard was
 * taken away fails (EBUSY, retryable: the retry checks the lock again). A missing directory means
 * the lock file is gone with it: lost.
 */
export async function writeValueFenced(
  file: string,
  content: string,
  lock: HeldLock,
): Promise<'written' | 'lost'> {
  let outcome: 'placed' | 'lost';
  try {
    outcome = await placeWhileFileLockHeld(file, lock, { name: 'value', content, safety: 'durable' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT' && !(await directoryExists(dirname(file))))
      return 'lost';
    throw error;
  }
  if (outcome === 'lost') return 'lost';
  await syncDirectory(dirname(file));
  return 'written';
}

async function directoryExists(directory: string): Promise<boolean> {
  try {
    return (await stat(directory)).isDirectory();
  } catch {
    return false;
  }
}

/**
 * After a durable value write: keep the value it replaced (readPrevious), then record the write.
 * Neither step can fail the write; a problem is reported as `bookkeepingError`.
 */
async function afterWrite(
  context: WriteContext,
  file: string,
  target: StoreTarget,
  record: SecretRecord,
  alreadyApplied: boolean,
): Promise<WriteResult> {
  const kept = await keepReplaced(context, file, target);
  const result = await recordWrite(context, file, target, record, alreadyApplied);
  if (kept !== undefined && result.bookkeepingError === undefined) result.bookkeepingError = kept;
  return result;
}

/** keepReplacedValue, best effort: a fixed text naming the problem (never the value), or undefined. */
async function keepReplaced(
  context: WriteContext,
  file: string,
  target: StoreTarget,
): Promise<string | undefined> {
  try {
    await keepReplacedValue(file);
    return undefined;
  } catch (error) {
    const errno = (error as NodeJS.ErrnoException | undefined)?.code;
    return `file backend ${context.backend}: keeping the value replaced at ${JSON.stringify(target.path)} failed (${errno ?? 'error'})`;
  }
}

/**
 * Records a durable value write in the sidecar. The value is the secret's only copy that
 * counts: a sidecar that cannot be updated must not make the write look failed (that would
 * send the secret to a fallback and alert that the primary holds a dead secret). The problem
 * is reported in the result, and the next sidecar change records the write.
 */
async function recordWrite(
  context: WriteContext,
  file: string,
  target: StoreTarget,
  record: SecretRecord,
  alreadyApplied: boolean,
): Promise<WriteResult> {
  const digest = record.secret.digest();
  try {
    const sidecar = await updateSidecar(file, (current) => bumpVersion(current, record.rotationId, digest));
    context.known.sidecarRecordedWrite(file);
    return { version: String(sidecar.version), alreadyApplied };
  } catch (error) {
    context.known.sidecarMissedWrite(file, { rotationId: record.rotationId, digest, shape: target.shape });
    const mtime = await stat(file).then(
      (info) => `mtime-${String(info.mtimeMs)}`,
      () => 'unrecorded',
    );
    return {
      version: mtime,
      alreadyApplied,
      bookkeepingError: fileBackendError(context.backend, 'write', target.path, error).message,
    };
  }
}
