// The file backend's class: secrets as local files under one directory (the demo's embedded default
// and a valid fallback destination). Values are written atomically with mode 0600; keyroll's
// bookkeeping sits beside each value in `<file>.keyroll.json`, the lock in `<file>.keyroll.lock`,
// the value the latest write replaced in `<file>.keyroll.previous` (previous.ts).
import { access, constants, mkdir, open, stat, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { BackendOperation } from '../errors.ts';
import type { BackendDeps } from '../registry.ts';
import { parseStoredValue, renderValue } from '../render.ts';
import type {
  Backend,
  FailureRecord,
  HeldLock,
  Intent,
  KeyState,
  LockOutcome,
  LockRequest,
  PreflightResult,
  ProbeRecord,
  SecretRecord,
  RotationRecord,
  StoreTarget,
  StoredSecret,
  WriteFence,
  WriteResult,
} from '../types.ts';
import type { FileBackendConfig } from './config.ts';
import { DIRECTORY_MODE, tempPathFor } from './atomic.ts';
import { fileBackendError, invalidTargetError, lockLostError } from './errors.ts';
import { FileKnowledge } from './known.ts';
import { acquireFileLock, refreshFileLock, releaseFileLock } from './lock.ts';
import { resolveInside } from './target.ts';
import { keepReplacedValue, readReplacedValue } from './previous.ts';
import * as records from './records.ts';
import { bumpVersion, readSidecar, updateSidecar, type RecordsContext } from './records.ts';
import { readStoredValue, statIfExists } from './stored-value.ts';
import { writeValueDurably, writeValueFenced } from './write.ts';

export class FileBackend implements Backend {
  readonly kind = 'file';
  readonly name: string;
  readonly #directory: string;
  readonly #now: () => Date;
  /** Writes attempted, and a durable write whose sidecar update failed (known.ts). */
  readonly #known = new FileKnowledge();
  /** What the operation files (records.ts) work with. */
  readonly #context: RecordsContext = { known: this.#known };
  #directoryReady: Promise<void> | undefined;

  constructor(name: string, config: FileBackendConfig, deps: BackendDeps = {}) {
    this.name = name;
    this.#directory = config.directory;
    this.#now = deps.now ?? (() => new Date());
  }

  async preflight(target: StoreTarget): Promise<PreflightResult> {
    return this.#run('preflight', target, async (file) => {
      const checks: string[] = [];
      await mkdir(dirname(file), { recursive: true, mode: DIRECTORY_MODE });
      // Prove the directory takes a new file (the atomic write needs exactly that), then remove it.
      const probe = tempPathFor(file);
      const handle = await open(probe, 'wx', 0o600);
      await handle.close();
      await unlink(probe);
      checks.push(`directory ${dirname(file)} writable`);
      const existing = await statIfExists(file);
      if (existing !== undefined) {
        if (!existing.isFile()) throw invalidTargetError(this.name, 'preflight', target.path, 'is not a regular file');
        await access(file, constants.R_OK | constants.W_OK);
        checks.push(`${file} readable and writable`);
      }
      await readSidecar(file);
      checks.push('bookkeeping readable');
      return { exists: existing !== undefined, checks };
    });
  }

  async acquireLock(target: StoreTarget, request: LockRequest): Promise<LockOutcome> {
    return this.#run('lock', target, async (file) => {
      await mkdir(dirname(file), { recursive: true, mode: DIRECTORY_MODE });
      return acquireFileLock(file, request, this.#now);
    });
  }

  async refreshLock(target: StoreTarget, lock: HeldLock, ttlMs: number): Promise<HeldLock | undefined> {
    return this.#run('lock', target, (file) => refreshFileLock(file, lock, ttlMs, this.#now));
  }

  async releaseLock(target: StoreTarget, lock: HeldLock): Promise<void> {
    await this.#run('unlock', target, (file) => releaseFileLock(file, lock));
  }

  async setIntent(target: StoreTarget, intent: Intent): Promise<void> {
    await this.#run('intent', target, (file) => records.setIntent(this.#context, file, intent));
  }

  async clearIntent(target: StoreTarget, rotationId: string): Promise<void> {
    await this.#run('intent', target, (file) => records.clearIntent(this.#context, file, rotationId));
  }

  async writeSecret(target: StoreTarget, record: SecretRecord, fence?: WriteFence): Promise<WriteResult> {
    return this.#run(
      'write',
      target,
      async (file) => {
        const digest = record.secret.digest();
        // Idempotent retry (invariant 8): the secret is unique to its roll, so finding it stored
        // means an earlier attempt landed. Only a retry looks: the first attempt's only I/O is
        // the atomic write itself (invariant 2).
        if (this.#known.writeAttempted(file, record.rotationId)) {
          const stored = await readStoredValue(file, target.shape);
          if (stored?.secret.equals(record.secret) === true) {
            const sidecar = await readSidecar(file).catch(() => undefined);
            if (sidecar?.lastWrite?.rotationId === record.rotationId && sidecar.lastWrite.digest === digest) {
              // The earlier attempt may have ended before it kept the replaced value.
              const kept = await this.#keepReplaced(file, target);
              return { version: String(sidecar.lastWrite.version), alreadyApplied: true, ...(kept === undefined ? {} : { bookkeepingError: kept }) };
            }
            return this.#afterWrite(file, target, record, true);
          }
        }
        const value = renderValue(target.shape, record);
        const content = typeof value === 'string' ? value : `${JSON.stringify(value, null, 2)}\n`;
        if (fence === undefined) await writeValueDurably(file, content);
        else if ((await writeValueFenced(file, content, fence.lock)) === 'lost') throw lockLostError(this.name, target.path);
        return this.#afterWrite(file, target, record, false);
      },
      { prepareDirectory: false },
    );
  }

  async readSecret(target: StoreTarget): Promise<StoredSecret | undefined> {
    return this.#run('read', target, async (file) => {
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
      const unrecorded = this.#known.unrecordedWrite(file);
      const rotationId = stored.rotationId ?? (ours ? sidecar.lastWrite?.rotationId : unrecorded?.digest === digest ? unrecorded.rotationId : undefined);
      if (rotationId !== undefined) result.rotationId = rotationId;
      return result;
    });
  }

  async readPrevious(target: StoreTarget): Promise<StoredSecret | undefined> {
    return this.#run('read', target, async (file) => {
      const text = await readReplacedValue(file);
      return text === undefined ? undefined : parseStoredValue(target.shape, text);
    });
  }

  async readState(target: StoreTarget): Promise<KeyState> {
    return this.#run('state', target, (file) => records.readState(file));
  }

  async recordRotation(target: StoreTarget, rotation: RotationRecord, options: { clearIntent?: boolean } = {}): Promise<void> {
    await this.#run('record', target, (file) => records.recordRotation(this.#context, file, rotation, options));
  }

  async recordProbe(target: StoreTarget, probe: ProbeRecord): Promise<void> {
    await this.#run('record', target, (file) => records.recordProbe(this.#context, file, probe));
  }

  async recordFailure(target: StoreTarget, failure: FailureRecord): Promise<void> {
    await this.#run('record', target, (file) => records.recordFailure(this.#context, file, failure));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /**
   * After a durable value write: keep the value it replaced (readPrevious), then record the write.
   * Neither step can fail the write; a problem is reported as `bookkeepingError`.
   */
  async #afterWrite(file: string, target: StoreTarget, record: SecretRecord, alreadyApplied: boolean): Promise<WriteResult> {
    const kept = await this.#keepReplaced(file, target);
    const result = await this.#recordWrite(file, target, record, alreadyApplied);
    if (kept !== undefined && result.bookkeepingError === undefined) result.bookkeepingError = kept;
    return result;
  }

  /** keepReplacedValue, best effort: a fixed text naming the problem (never the value), or undefined. */
  async #keepReplaced(file: string, target: StoreTarget): Promise<string | undefined> {
    try {
      await keepReplacedValue(file);
      return undefined;
    } catch (error) {
      const errno = (error as NodeJS.ErrnoException | undefined)?.code;
      return `file backend ${this.name}: keeping the value replaced at ${JSON.stringify(target.path)} failed (${errno ?? 'error'})`;
    }
  }

  /**
   * Records a durable value write in the sidecar. The value is the secret's only copy that
   * counts: a sidecar that cannot be updated must not make the write look failed (that would
   * send the secret to a fallback and alert that the primary holds a dead secret). The problem
   * is reported in the result, and the next sidecar change records the write.
   */
  async #recordWrite(file: string, target: StoreTarget, record: SecretRecord, alreadyApplied: boolean): Promise<WriteResult> {
    const digest = record.secret.digest();
    try {
      const sidecar = await updateSidecar(file, (current) => bumpVersion(current, record.rotationId, digest));
      this.#known.sidecarRecordedWrite(file);
      return { version: String(sidecar.version), alreadyApplied };
    } catch (error) {
      this.#known.sidecarMissedWrite(file, { rotationId: record.rotationId, digest, shape: target.shape });
      const mtime = await stat(file).then(
        (info) => `mtime-${String(info.mtimeMs)}`,
        () => 'unrecorded',
      );
      return { version: mtime, alreadyApplied, bookkeepingError: fileBackendError(this.name, 'write', target.path, error).message };
    }
  }

  /** Resolves the target inside the directory, creates the directory, maps every failure to a BackendError. */
  async #run<T>(operation: BackendOperation, target: StoreTarget, body: (file: string) => Promise<T>, options: { prepareDirectory: boolean } = { prepareDirectory: true }): Promise<T> {
    const file = resolveInside(this.#directory, target.path);
    if (file === undefined) {
      throw invalidTargetError(this.name, operation, target.path, 'must be a relative path inside the backend directory');
    }
    try {
      if (options.prepareDirectory) await this.#prepareDirectory();
      return await body(file);
    } catch (error) {
      throw fileBackendError(this.name, operation, target.path, error);
    }
  }

  /**
   * Creates the backend directory once per instance, not before every operation (a 1,000-key
   * run spent half a second in these mkdir calls). Operations that create a file still create
   * its parent themselves, so a directory removed meanwhile comes back where it is needed.
   */
  #prepareDirectory(): Promise<void> {
    this.#directoryReady ??= mkdir(this.#directory, { recursive: true, mode: DIRECTORY_MODE }).then(
      () => undefined,
      (error: unknown) => {
        this.#directoryReady = undefined;
        throw error;
      },
    );
    return this.#directoryReady;
  }
}
