// What the file backend remembers between calls, in memory only (a new process knows nothing and
// reads everything): which writes it attempted, so only a retry pays for the idempotency read
// (invariants 2 and 8), and a durable write whose sidecar update failed, so the next sidecar change
// records it (the value is what counts; its bookkeeping catches up). Both change only through the
// transitions below, each named for what just happened.
import { AttemptLog } from '../attempts.ts';
import type { ValueShape } from '../types.ts';

/** A durable value write whose sidecar update failed: recorded by the next sidecar change. */
export interface UnrecordedWrite {
  rotationId: string;
  digest: string;
  shape: ValueShape;
}

export class FileKnowledge {
  /** Writes attempted per (file, rotation). */
  readonly #attempts = new AttemptLog();
  readonly #unrecorded = new Map<string, UnrecordedWrite>();

  /** A write of `rotationId` to `file` starts: true when it is a retry (an earlier attempt may have landed). */
  writeAttempted(file: string, rotationId: string): boolean {
    return this.#attempts.record(file, rotationId);
  }

  /** The durable write to `file` that the sidecar has not recorded yet, if any. */
  unrecordedWrite(file: string): UnrecordedWrite | undefined {
    return this.#unrecorded.get(file);
  }

  /** The sidecar recorded the write just made to `file`. */
  sidecarRecordedWrite(file: string): void {
    this.#unrecorded.delete(file);
  }

  /** A durable write to `file` whose sidecar update failed: the next sidecar change records it. */
  sidecarMissedWrite(file: string, write: UnrecordedWrite): void {
    this.#unrecorded.set(file, write);
  }

  /** A sidecar change started with `write` unrecorded and is done: forgotten, unless another write missed its record since. */
  sidecarCaughtUp(file: string, write: UnrecordedWrite | undefined): void {
    if (this.#unrecorded.get(file) === write) this.#unrecorded.delete(file);
  }
}
