// The file backend's class: secrets as local files under one directory (the demo's embedded default
// and a valid fallback destination). Values are written atomically with mode 0600; keyroll's
// bookkeeping sits beside each value in `<file>.keyroll.json`, the lock in `<file>.keyroll.lock`,
// the value the latest write replaced in `<file>.keyroll.previous` (previous.ts). Each method
// resolves the target inside the directory (target.ts), maps every failure to a BackendError
// (errors.ts), and hands the rest to the file of its concern: preflight.ts, lock.ts, write.ts,
// records.ts; what the instance remembers between calls is known.ts.
import { mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { BackendOperation } from '../errors.ts';
import type {
  Backend,
  BackendDeps,
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
import { DIRECTORY_MODE } from './atomic.ts';
import type { FileBackendConfig } from './config.ts';
import { fileBackendError, invalidTargetError } from './errors.ts';
import { FileKnowledge } from './known.ts';
import { acquireFileLock, refreshFileLock, releaseFileLock } from './lock.ts';
import { preflight } from './preflight.ts';
import * as records from './records.ts';
import { resolveInside } from './target.ts';
import * as write from './write.ts';
import type { WriteContext } from './write.ts';

export class FileBackend implements Backend {
  readonly kind = 'file';
  readonly name: string;
  readonly #directory: string;
  readonly #now: () => Date;
  /** Writes attempted, and a durable write whose sidecar update failed (known.ts). */
  readonly #known = new FileKnowledge();
  /** What the operation files (records.ts, write.ts) work with. */
  readonly #context: WriteContext;
  #directoryReady: Promise<void> | undefined;

  constructor(name: string, config: FileBackendConfig, deps: BackendDeps = {}) {
    this.name = name;
    this.#directory = config.directory;
    this.#now = deps.now ?? (() => new Date());
    this.#context = { backend: name, known: this.#known };
  }

  async preflight(target: StoreTarget): Promise<PreflightResult> {
    return this.#run('preflight', target, (file) => preflight(this.name, file, target));
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
      (file) => write.writeSecret(this.#context, file, target, record, fence),
      { prepareDirectory: false },
    );
  }

  async readSecret(target: StoreTarget): Promise<StoredSecret | undefined> {
    return this.#run('read', target, (file) => write.readSecret(this.#context, file, target));
  }

  async readPrevious(target: StoreTarget): Promise<StoredSecret | undefined> {
    return this.#run('read', target, (file) => write.readPrevious(file, target));
  }

  async readState(target: StoreTarget): Promise<KeyState> {
    return this.#run('state', target, (file) => records.readState(file));
  }

  async recordRotation(
    target: StoreTarget,
    rotation: RotationRecord,
    options: { clearIntent?: boolean } = {},
  ): Promise<void> {
    await this.#run('record', target, (file) =>
      records.recordRotation(this.#context, file, rotation, options),
    );
  }

  /** The probe's field alone, read, changed and written under the sidecar's guard (records.ts): no lock needed. */
  recordsProbeWithoutLock(): boolean {
    return true;
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

  /** Resolves the target inside the directory, creates the directory, maps every failure to a BackendError. */
  async #run<T>(
    operation: BackendOperation,
    target: StoreTarget,
    body: (file: string) => Promise<T>,
    options: { prepareDirectory: boolean } = { prepareDirectory: true },
  ): Promise<T> {
    const file = resolveInside(this.#directory, target.path);
    if (file === undefined) {
      throw invalidTargetError(
        this.name,
        operation,
        target.path,
        'must be a relative path inside the backend directory',
      );
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
