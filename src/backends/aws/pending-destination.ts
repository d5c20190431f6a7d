// The primary destination of a native rotation (src/lambda/) as the rotation engine sees it: the AWS backend
// itself for everything (preflight, lock, intent, records), except that the write after the roll
// goes to AWSPENDING under the event's ClientRequestToken (pending.ts) instead of
// moving AWSCURRENT. The engine's roll-then-store step stays the one implementation (invariant 2:
// the put is the first I/O after the roll answer); finishSecret moves AWSCURRENT later.
import { renderText } from '../render.ts';
import type { AwsNativeRotation } from './pending.ts';
import type {
  Backend,
  FailureRecord,
  HeldLock,
  Intent,
  KeyState,
  LockOutcome,
  LockRequest,
  PreflightOptions,
  PreflightResult,
  ProbeRecord,
  RecordOptions,
  RotationRecord,
  SecretRecord,
  StoreTarget,
  StoredSecret,
  WriteReservation,
  WriteResult,
} from '../types.ts';

export class PendingDestinationBackend implements Backend {
  readonly kind = 'aws';
  readonly name: string;
  readonly #inner: Backend;
  readonly #native: AwsNativeRotation;
  readonly #token: string;

  constructor(inner: Backend, native: AwsNativeRotation, token: string) {
    this.name = inner.name;
    this.#inner = inner;
    this.#native = native;
    this.#token = token;
  }

  /** Invariants 2 and 8: one PutSecretValue labelled AWSPENDING with the event's token; no fence read before it. */
  async writeSecret(target: StoreTarget, record: SecretRecord): Promise<WriteResult> {
    return this.#native.putPending(target.path, renderText(target.shape, record), this.#token);
  }

  preflight(target: StoreTarget, options?: PreflightOptions): Promise<PreflightResult> {
    return this.#inner.preflight(target, options);
  }
  async ensureFresh(minValidityMs: number): Promise<void> {
    await this.#inner.ensureFresh?.(minValidityMs);
  }
  async reserveWrite(target: StoreTarget): Promise<WriteReservation> {
    // One put, never a stage move: the unfenced write's budget.
    return (await this.#inner.reserveWrite?.(target, { fenced: false })) ?? { release: () => undefined };
  }
  acquireLock(target: StoreTarget, request: LockRequest): Promise<LockOutcome> {
    return this.#inner.acquireLock(target, request);
  }
  refreshLock(target: StoreTarget, lock: HeldLock, ttlMs: number): Promise<HeldLock | undefined> {
    return this.#inner.refreshLock(target, lock, ttlMs);
  }
  releaseLock(target: StoreTarget, lock: HeldLock): Promise<void> {
    return this.#inner.releaseLock(target, lock);
  }
  setIntent(target: StoreTarget, intent: Intent): Promise<void> {
    return this.#inner.setIntent(target, intent);
  }
  clearIntent(target: StoreTarget, rotationId: string): Promise<void> {
    return this.#inner.clearIntent(target, rotationId);
  }
  readSecret(target: StoreTarget): Promise<StoredSecret | undefined> {
    return this.#inner.readSecret(target);
  }
  async readPrevious(target: StoreTarget): Promise<StoredSecret | undefined> {
    return this.#inner.readPrevious?.(target);
  }
  readState(target: StoreTarget): Promise<KeyState> {
    return this.#inner.readState(target);
  }
  recordRotation(target: StoreTarget, rotation: RotationRecord, options?: RecordOptions): Promise<void> {
    return this.#inner.recordRotation(target, rotation, options);
  }
  recordProbe(target: StoreTarget, probe: ProbeRecord, options?: Pick<RecordOptions, 'releaseLock'>): Promise<void> {
    return this.#inner.recordProbe(target, probe, options);
  }
  recordFailure(target: StoreTarget, failure: FailureRecord): Promise<void> {
    return this.#inner.recordFailure(target, failure);
  }
  close(): Promise<void> {
    return this.#inner.close();
  }
}
