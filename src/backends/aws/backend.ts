// The AWS Secrets Manager backend: the Backend interface over one SecretsManagerClient.
// Each concern lives in its own file (preflight, lock, write, records); this class checks the
// target path once per call and hands each method to its file. It also keeps what the instance
// learned from its own calls (known.ts), so a request whose answer is already known is skipped.
// A write with a fence (the primary destination, whose lock the rotation holds) goes to write-fenced.ts.
import { AttemptLog } from '../attempts.ts';
import type { BackendOperation } from '../errors.ts';
import type {
  Backend,
  FailureRecord,
  HeldLock,
  Intent,
  KeyState,
  LockOutcome,
  ProbeRecord,
  LockRequest,
  RecordOptions,
  PreflightPurpose,
  PreflightResult,
  RotationRecord,
  SecretRecord,
  StoreTarget,
  StoredSecret,
  WriteFence,
  WriteReservation,
  WriteResult,
} from '../types.ts';
import type { QuotaDeps } from '../quota/observer.ts';
import type { AwsBackendConfig } from './config.ts';
import type { AwsCredentialsInput } from './client.ts';
import { SecretsManagerCalls } from './client.ts';
import { writeFenced, type FencedWriteContext } from './write-fenced.ts';
import { HeldFacts, TargetHints, type TargetSeen } from './known.ts';
import type { NativeRotation } from '../native.ts';
import { AwsNativeRotation } from './native/rotation.ts';
import * as lock from './lock/lock.ts';
import { LockSightings, type LockContext } from './lock/value.ts';
import { refreshLock } from './lock/refresh.ts';
import * as records from './records.ts';
import { describeTarget, seenOf } from './records.ts';
import type { RecordsContext } from './records.ts';
import * as checks from './preflight.ts';
import type { PreflightContext } from './preflight.ts';
import { checkTargetPath } from './target.ts';
import * as values from './write.ts';
import type { WriteContext } from './write.ts';

export interface AwsBackendOptions {
  now: () => Date;
  /** Region when the config has none (else the SDK's chain: AWS_REGION, profile). */
  region?: string | undefined;
  /** Static keys when the caller's environment carries them, or a provider (tests); else the SDK's default chain. */
  credentials?: AwsCredentialsInput | undefined;
  /** Paced and throttled requests are reported here; shards divide the quotas. */
  quota?: QuotaDeps;
}

export class AwsBackend implements Backend {
  readonly kind = 'aws';
  readonly name: string;
  /** The staging-label calls of AWS-native rotation (src/lambda/, `keyroll aws enable-rotation`). */
  readonly native: NativeRotation;
  readonly #calls: SecretsManagerCalls;
  readonly #preflight: PreflightContext;
  readonly #lock: LockContext;
  readonly #write: WriteContext;
  readonly #fenced: FencedWriteContext;
  readonly #records: RecordsContext;
  readonly #targets: TargetHints;
  readonly #held: HeldFacts;

  constructor(name: string, config: AwsBackendConfig, options: AwsBackendOptions) {
    this.name = name;
    this.#calls = new SecretsManagerCalls({
      backendName: name,
      region: config.region ?? options.region,
      endpoint: config.endpoint,
      timeoutMs: config.timeoutMs,
      credentials: options.credentials,
      quotas: config.quotas,
      quotaDeps: options.quota,
    });
    this.native = new AwsNativeRotation(this.#calls, name);
    this.#held = new HeldFacts(options.now);
    this.#targets = new TargetHints(options.now);
    // One record of lock sightings and release marks for every file: any description of a target
    // says which lock its finish record gave back (lock/lock.ts).
    const shared = {
      calls: this.#calls,
      backendName: name,
      kmsKeyId: config.kmsKeyId,
      tags: config.tags,
      targets: this.#targets,
      sightings: new LockSightings(),
    };
    this.#preflight = {
      ...shared,
      createIfMissing: config.createIfMissing,
      now: options.now,
      ...(config.quotas ? { versionsPerSecret: config.quotas.versionsPerSecret } : {}),
    };
    this.#lock = { ...shared, now: options.now };
    this.#write = { ...shared, createIfMissing: config.createIfMissing, attempts: new AttemptLog() };
    this.#fenced = { ...this.#write, held: this.#held, lock: this.#lock };
    this.#records = { ...shared, createIfMissing: config.createIfMissing, held: this.#held };
  }

  #check(target: StoreTarget, operation: BackendOperation): void {
    checkTargetPath(target.path, { backendName: this.name, operation });
  }

  async preflight(target: StoreTarget, purpose: PreflightPurpose = 'check'): Promise<PreflightResult> {
    this.#check(target, 'preflight');
    return checks.preflight(this.#preflight, target, purpose);
  }

  async ensureFresh(minValidityMs: number): Promise<void> {
    await this.#calls.ensureFreshCredentials(minValidityMs);
  }

  async reserveWrite(target: StoreTarget, options: { fenced: boolean }): Promise<WriteReservation> {
    this.#check(target, 'write');
    // The fenced write is a put and a stage move (write-fenced.ts); an unfenced one a put. A target last
    // seen missing is created by the write (CreateSecret), or put into when it exists after all.
    const counts = this.#targets.likelyMissing(target.path)
      ? { create: 1, write: 1 }
      : { write: options.fenced ? 2 : 1 };
    return this.#calls.reserve(target.path, counts);
  }

  async reserveLockRefresh(target: StoreTarget, held: HeldLock): Promise<WriteReservation> {
    this.#check(target, 'lock');
    // The refresh is the lock's compare-and-swap where the lock lives (the target or its
    // companion, lock/refresh.ts): a put and a stage move.
    const { place } = lock.placeOfLock(this.#lock, target.path, held);
    return this.#calls.reserve(place.secretId, { write: 2 }, 'lock');
  }

  async acquireLock(target: StoreTarget, request: LockRequest): Promise<LockOutcome> {
    this.#check(target, 'lock');
    // Where the lock lives and how to start are decided on the target as described last (the
    // preflight's, seconds ago), else on a description made now (lock/lock.ts).
    let outcome: LockOutcome;
    const describe = async (): Promise<TargetSeen> =>
      seenOf(await describeTarget(this.#records, target.path, 'lock'));
    try {
      outcome = await lock.acquireLock(this.#lock, target.path, request, {
        seen: this.#targets.recent(target.path),
        describe,
      });
    } catch (error) {
      // A refresh whose outcome is unknown: the lock may be lost, so nothing known under it is kept.
      this.#held.dropIfFor(target.path, request);
      throw error;
    }
    // A new or refreshed lock starts with nothing known under it but itself; a refused refresh
    // means the lock was lost.
    if (outcome.acquired) this.#held.hold(target.path, outcome.lock, request.ttlMs);
    else this.#held.dropIfFor(target.path, request);
    return outcome;
  }

  async refreshLock(target: StoreTarget, held: HeldLock, ttlMs: number): Promise<HeldLock | undefined> {
    this.#check(target, 'lock');
    // Given back with the finish record already: nothing to keep alive, and nothing is sent.
    if (this.#held.wasReleased(target.path, held)) return held;
    let refreshed: HeldLock | undefined;
    try {
      refreshed = await refreshLock(this.#lock, target.path, held, ttlMs);
    } catch (error) {
      // Outcome unknown: the lock may be lost, so nothing known under it is kept.
      this.#held.dropIfFor(target.path, held);
      throw error;
    }
    if (refreshed === undefined) this.#held.dropIfFor(target.path, held);
    else this.#held.refresh(target.path, refreshed, ttlMs);
    return refreshed;
  }

  async releaseLock(target: StoreTarget, held: HeldLock): Promise<void> {
    this.#check(target, 'unlock');
    this.#held.dropIfFor(target.path, held);
    // Given back with the finish record (or the drift probe's): no compare-and-swap, no write.
    if (this.#held.takeReleased(target.path, held)) return;
    await lock.releaseLock(this.#lock, target.path, held);
  }

  async setIntent(target: StoreTarget, intent: Intent): Promise<void> {
    this.#check(target, 'intent');
    await records.setIntent(this.#records, target, intent);
  }

  async clearIntent(target: StoreTarget, rotationId: string): Promise<void> {
    this.#check(target, 'intent');
    await records.clearIntent(this.#records, target, rotationId);
  }

  async writeSecret(target: StoreTarget, record: SecretRecord, fence?: WriteFence): Promise<WriteResult> {
    this.#check(target, 'write');
    // The same attempt log for both: a fenced retry of an unfenced attempt (or the reverse) reads first.
    return fence === undefined
      ? values.writeSecret(this.#write, target, record)
      : writeFenced(this.#fenced, target, record, fence);
  }

  async readSecret(target: StoreTarget): Promise<StoredSecret | undefined> {
    this.#check(target, 'read');
    return values.readSecret(this.#write, target);
  }

  async readPrevious(target: StoreTarget): Promise<StoredSecret | undefined> {
    this.#check(target, 'read');
    return values.readPrevious(this.#write, target);
  }

  async readState(target: StoreTarget): Promise<KeyState> {
    this.#check(target, 'state');
    return records.readState(this.#records, this.#lock, target);
  }

  async recordRotation(
    target: StoreTarget,
    rotation: RotationRecord,
    options: RecordOptions = {},
  ): Promise<void> {
    this.#check(target, 'record');
    await records.recordRotation(this.#records, target, rotation, options);
  }

  async recordProbe(
    target: StoreTarget,
    probe: ProbeRecord,
    options: Pick<RecordOptions, 'releaseLock'> = {},
  ): Promise<void> {
    this.#check(target, 'record');
    await records.recordProbe(this.#records, target, probe, options);
  }

  /** One tag of its own (TagResource changes only the tags it names): no lock needed. */
  recordsProbeWithoutLock(): boolean {
    return true;
  }

  async recordFailure(target: StoreTarget, failure: FailureRecord): Promise<void> {
    this.#check(target, 'record');
    await records.recordFailure(this.#records, target, failure);
  }

  async close(): Promise<void> {
    await this.#calls.close();
  }
}
