// What every secret backend implements (AWS Secrets Manager, Vault/OpenBao KV v2, local files),
// as four small roles: WriteCheck (preflight), SecretStore (the write and the read-back), KeyLock
// (the key's lock) and Records (the bookkeeping beside the secret). `Backend` is their composition;
// a caller takes only the role it uses. The rotation engine talks only to these types; a backend
// folder holds the rest, laid out alike in every folder (README.md beside this file). Every
// method may be retried by the engine, so each must be safe to run again.
import type { Dispatcher } from 'undici';
import type { Secret } from '../audit/public/secret.ts';
import type { BackendConfig } from './config.ts';
import type { NativeRotation } from './native.ts';
import type { QuotaDeps } from './quota/observer.ts';

export type BackendKind = 'aws' | 'vault' | 'file';

/** What a backend may take from its surroundings; everything has a real default. */
export interface BackendDeps {
  /** Clock for lock expiry and timestamps (tests move it by hand). */
  now?: () => Date;
  /** HTTP dispatcher for HTTP-based backends (tests, proxies). */
  dispatcher?: Dispatcher;
  /** Environment for `env:` references and SDK credential chains. */
  env?: NodeJS.ProcessEnv;
  /** Who hears of paced and throttled requests, and how many shards share the quotas. */
  quota?: QuotaDeps;
}

/**
 * Builds the backend of one kind from its policy settings (each folder's `index.ts` exports one;
 * registry.ts maps every BackendKind to its factory, so a kind without one fails the type check).
 */
export type BackendFactory<K extends BackendKind> = (
  name: string,
  config: Extract<BackendConfig, { kind: K }>,
  deps: BackendDeps,
) => Backend;

/** Extra fields a JSON-shaped stored value may carry beside the secret. */
export type StoredField = 'keyId' | 'organizationId' | 'rotatedAt' | 'rotationId';

/** How the secret is laid out at its destination. */
export interface ValueShape {
  /** `raw`: the secret string alone; `json`: an object with `secretField` plus `fields`. */
  format: 'raw' | 'json';
  /** Name of the field that holds the secret in JSON values (and in Vault, where data is a map). */
  secretField: string;
  /** Fields stored beside the secret in JSON values. */
  fields: StoredField[];
}

/** One place a key's secret is written: a backend-specific path and the value's shape. */
export interface StoreTarget {
  /** AWS: secret name or ARN; Vault: path under the KV v2 mount; file: path under the directory. */
  path: string;
  shape: ValueShape;
}

/** What is written: the secret and the facts stored beside it. */
export interface SecretRecord {
  secret: Secret;
  keyId: string;
  organizationId: string;
  rotationId: string;
  /** ISO-8601 time of the roll answer. */
  rotatedAt: string;
}

export interface StoredSecret {
  secret: Secret;
  /** Backend version id (AWS VersionId, Vault version number, file mtime-based). */
  version?: string;
  /** The rotation that wrote it, when the backend recorded one. */
  rotationId?: string;
  /**
   * The API key whose secret it is, when the stored value names it (json shapes with the `keyId`
   * field, the default): for a two-slot entry, which slot a kept earlier value belongs to.
   */
  keyId?: string;
}

export interface WriteResult {
  /** Backend version id of the write (AWS VersionId, Vault version). */
  version: string;
  /** True when the write had already been applied by an earlier attempt (idempotent retry). */
  alreadyApplied: boolean;
  /**
   * Set when the value is durable but the backend could not update its own bookkeeping beside
   * it (the file backend's sidecar): the write still succeeded, and the backend repairs the
   * bookkeeping on its next change. A fixed text with no secret, for an audit warning.
   */
  bookkeepingError?: string;
}

/** Marker written before the roll (invariant 6): a run died mid-rotation if one is left behind. */
export interface Intent {
  rotationId: string;
  keyId: string;
  owner: string;
  /** ISO-8601 */
  startedAt: string;
  /**
   * ISO-8601. Set when this rotation took the lock over from a runner that had left its own
   * marker and may still act (a roll in flight, a paused process): until this time nobody clears
   * the marker, even when the stored secret works; later runs probe again (invariant 9).
   */
  holdUntil?: string;
  /**
   * Set when the marked rotation answers a leak: if it died before storing its own secret, the
   * secret that still works is the leaked one, and recovery rolls it at once (invariant 6).
   * Absent in markers of older keyrolls and of every other rotation.
   */
  reason?: string;
  /**
   * Set with `reason`: the fingerprint (Secret.fingerprint) of the value the primary held when
   * the marker was written, so recovery re-rolls only while that same value is still stored (the
   * leaked one, or for a leak of a two-slot entry's standby the active value the run had not yet
   * replaced), never a value stored since, such as a secret restored by hand from escrow.
   * Absent when nothing was stored then.
   */
  storedFingerprint?: string;
}

export interface LockRequest {
  /** Who asks: stable per process, e.g. `host/pid/random`. */
  owner: string;
  rotationId: string;
  ttlMs: number;
  /**
   * How far the runners' clocks may disagree (invariant 9): another owner's lock is stale, and
   * may be taken over, only once its expiry lies this far in the past by the clock the backend
   * judges with. Absent: 0.
   */
  clockSkewMs?: number;
  /**
   * Owners proven dead (issue 30; src/leader/holder-liveness.ts: their pod is gone or their
   * container was replaced): a lock of one of them is taken over at once, exactly as a stale one
   * is (the same compare-and-swap and fencing, `tookOver: true`), whatever its expiry. Only a proof
   * belongs here, never a guess: a paused holder's lock must wait for its TTL (invariant 9).
   */
  deadOwners?: readonly string[];
}

/**
 * Proof that a write comes from the current holder of the lock of the target it writes
 * (invariant 9; a key holds one lock per destination). The backend checks it in the write itself:
 * the lock still carries this lock's token (file: under the same guard a takeover takes, and a
 * rename through that guard, so a holder paused past the guard's staleness renames nothing), or
 * the data is still at the version this process read under the lock (Vault check-and-set, and a
 * takeover writes the data again as a new version so an old holder's base no longer matches; AWS
 * moves AWSCURRENT only from that version). A write whose fence no longer holds writes nothing
 * visible and throws BackendError `KR_LOCK_LOST` (not retryable): a runner that lost its lock
 * never overwrites what the new holder stored, whether it resumes before or after the new
 * holder's write.
 */
export interface WriteFence {
  lock: HeldLock;
}

export interface LockInfo {
  owner: string;
  rotationId: string;
  /** ISO-8601; a lock past this time is stale and may be taken over. */
  expiresAt: string;
}

/** A lock this process holds; `token` is backend-private (e.g. a CAS version). */
export interface HeldLock extends LockInfo {
  token: string;
  /** True when a stale lock of another owner was taken over. */
  tookOver: boolean;
}

export type LockOutcome =
  | { acquired: true; lock: HeldLock }
  /** `doubts`: what the backend saw at the lock and does not trust (e.g. a forged release mark), for the audit. */
  | { acquired: false; holder: LockInfo; doubts?: RecordDoubt[] };

/** A completed rotation, as recorded for due-ness and `status`. */
export interface RotationRecord {
  rotationId: string;
  /** ISO-8601 time of the roll answer. */
  rotatedAt: string;
  /** Backend version id of the write. */
  version: string;
  /**
   * The API key whose secret was stored. For a two-slot entry this is the slot now active
   * (invariant 10): the next scheduled rotation rolls the other one. Absent in older records.
   */
  keyId?: string;
}

/** What a drift probe of the stored secret found (consumers' view: does it still work?). */
export interface ProbeRecord {
  /** ISO-8601 */
  at: string;
  result: 'works' | 'dead';
}

/**
 * The last failure of a key and the streak of consecutive failures it ends (failure backoff and
 * quarantine: src/rotation/failure-streak.ts). Recorded at the primary destination, so the streak
 * survives restarts and every runner sees the same one. The streak fields are optional: records
 * written before they existed still read (as one failure, over once a rotation is recorded after it).
 */
export interface FailureRecord {
  rotationId: string;
  step: string;
  errorCode: string;
  /** ISO-8601 */
  at: string;
  /** Consecutive failures up to this one; 0 once a success or `keyroll resume` ended the streak. */
  consecutive?: number;
  /** ISO-8601: the first failure of the streak. */
  firstAt?: string;
  /** ISO-8601: no automatic attempt before this time (exponential backoff, jittered). */
  nextAttemptAt?: string;
  /** ISO-8601: since when the key is quarantined (no automatic attempts until a person acts). */
  quarantinedAt?: string;
  /** ISO-8601: when the streak last raised an alert (first failure, quarantine, reminder). */
  lastAlertedAt?: string;
}

/** The KeyState fields a record keyroll reads back may be doubted in. */
export type DoubtedRecord =
  'lastRotatedAt' | 'lastRotationId' | 'lastKeyId' | 'lastProbe' | 'intent' | 'lock' | 'lastFailure';

/**
 * A record (or one field of it) keyroll found at a destination and does not act on as written:
 * `malformed` (not keyroll's format: corruption, or an edit by someone who may change tags or
 * metadata but not the secret), `future` (dated after now, beyond the policy's clock skew), or
 * `beyond-policy` (a backoff longer than the policy's cap). What keyroll did instead: `ignored`
 * (read as absent), `bounded` (held to the policy's limit) or `kept` (an intent marker: a damaged
 * marker still means a roll may have happened, invariant 6). Never carries a malformed value.
 */
export interface RecordDoubt {
  record: DoubtedRecord;
  /** The field inside the record (e.g. `quarantinedAt`); absent when the record as a whole is doubted. */
  field?: string;
  /** `forged`: a record that claims what its writer could not prove (an AWS lock release mark without the lock's release key). */
  problem: 'malformed' | 'future' | 'beyond-policy' | 'forged';
  action: 'ignored' | 'bounded' | 'kept';
  /** For `future` and `beyond-policy`: the time the record said, as ISO-8601. */
  value?: string;
}

/** keyroll's bookkeeping for one destination, read for due-ness, `status` and recovery. */
export interface KeyState {
  /** ISO-8601 time of the last completed rotation recorded by keyroll. */
  lastRotatedAt?: string;
  lastRotationId?: string;
  /** The API key whose secret the last recorded rotation stored (RotationRecord.keyId). */
  lastKeyId?: string;
  /** The last drift probe recorded (recordProbe). */
  lastProbe?: ProbeRecord;
  intent?: Intent;
  lock?: LockInfo;
  lastFailure?: FailureRecord;
  /**
   * Records present at the destination that keyroll does not trust as written: a backend notes
   * those it cannot decode at all, and trustState (src/rotation/trusted-state.ts), which every
   * reader of the state goes through, adds those that fail the record schemas or the policy's bounds.
   */
  doubts?: RecordDoubt[];
  /** False when nothing exists at the path yet. */
  exists: boolean;
}

/** Request budget taken before a roll for the write after it (Backend.reserveWrite, reserveLockRefresh). */
export interface WriteReservation {
  /**
   * Runs `calls`, the requests the budget was taken for (the write, or the lock refresh): only
   * requests made inside spend it, so nothing else on the same secret (a lock refresh before the
   * roll) can take the turn the write after the roll counts on.
   */
  use<T>(calls: () => Promise<T>): Promise<T>;
  /** Gives back what the write did not spend; safe to call more than once. */
  release(): void;
}

/**
 * Why a target is preflighted, which says what the caller does there next: a backend may leave to
 * that next step what it proves anyway, and send no probe of its own for it (AWS: the lock's
 * compare-and-swap is the fenced write's two calls on the same secret, and the intent marker's
 * TagResource proves TagResource; backends/aws/preflight.ts). Invariant 1 holds either way: the
 * roll comes after the lock and the marker.
 * - `check`: nothing follows (`keyroll validate`, the daemon's readiness, a fallback): every
 *   permission is probed.
 * - `check-native`: as `check`, for a key its store rotates itself (policy `scheduler: aws-native`,
 *   AWS's rotation function): the store's own rotation is expected to be enabled there, and its
 *   absence is what to point out.
 * - `rotation`: a rotation's destination: the key lock is taken there next, before any roll.
 * - `rotation-primary`: a rotation's primary destination: the key lock, then the intent marker.
 */
export type PreflightPurpose = 'check' | 'check-native' | 'rotation' | 'rotation-primary';

/** Options of the records written under the key lock (recordRotation, recordProbe). */
export interface RecordOptions {
  /** Also clear the intent marker when it names the recorded rotation (recordRotation only). */
  clearIntent?: boolean;
  /**
   * The caller is done with this lock once the record is written (nothing more under it): a
   * backend that can give the lock back in the same change does so (AWS: a tag of the record
   * frees it; no request of its own, where the lock's compare-and-swap costs two of the account's
   * write quota), and the caller's releaseLock for it then sends nothing. Other backends release
   * on releaseLock as before.
   */
  releaseLock?: HeldLock;
}

export interface PreflightResult {
  /** False when the secret does not exist yet and will be created by the first write. */
  exists: boolean;
  /** Human-readable facts proven (e.g. "token valid", "create+update on secret/data/x"). */
  checks: string[];
}

/** Which store, and which instance of it the policy named: what every role of a backend shares. */
export interface BackendIdentity {
  readonly kind: BackendKind;
  /** The name the policy gave this backend instance. */
  readonly name: string;
}

/**
 * Role: proving, before the roll, that a target can be written and that nothing will need
 * renewing between the roll answer and the write (invariants 1 and 2). Callers: the rotation's
 * preflight, `keyroll validate`, the daemon's readiness.
 */
export interface WriteCheck extends BackendIdentity {
  /**
   * Proves, without changing the stored secret, that credentials work and `target` can be
   * written (invariant 1), for `purpose` (default `check`: everything probed). Throws a
   * BackendError naming what failed.
   */
  preflight(target: StoreTarget, purpose?: PreflightPurpose): Promise<PreflightResult>;

  /**
   * Optional. Makes the backend's credentials valid for at least `minValidityMs` from now
   * (renewing a Vault token, logging in again, forcing the AWS SDK to fetch new credentials),
   * so that neither the roll nor the write after it has to renew anything: the write after the
   * roll answer must be the first I/O (invariant 2), and a renewal there would come before it.
   * The engine calls it for every destination and fallback right before the roll, with the
   * time the roll and the store may take. Throws a BackendError when the credentials cannot be
   * made valid for that long (a token at its max TTL): then the engine must not roll
   * (invariant 1). Backends without expiring credentials (file) do not implement it.
   */
  ensureFresh?(minValidityMs: number): Promise<void>;
}

/**
 * Role: the secret itself at a target: the write after the roll (invariant 2), idempotent
 * (invariant 8) and fenced by the key lock (invariant 9), its budget taken before the roll
 * (invariant 11), and the read-back. Callers: the store and verify steps, drift probes, leak
 * matching, `keyroll status`.
 */
export interface SecretStore extends BackendIdentity {
  /**
   * Optional. Takes, before the roll, the request budget the write after it needs, so that after
   * the roll answer the write is sent at once and never waits for its turn in a request quota
   * (invariant 2 under invariant 11): AWS reserves the put and the stage move of the fenced write
   * in its account's write quota. `fenced`: the primary destination's write, which carries the
   * lock's fence. The engine releases the reservation when the store is over; what the write did
   * not spend goes back. Throws a BackendError (KR_BACKEND_THROTTLED) when the budget cannot be
   * had within the backend's wait limit: then nothing is rolled. Backends without client-side
   * quotas do not implement it.
   */
  reserveWrite?(target: StoreTarget, options: { fenced: boolean }): Promise<WriteReservation>;

  /**
   * Writes the new secret (invariant 2: the first I/O after the roll answer). Idempotent for
   * the same `record.rotationId` (invariant 8): a retried write that already landed returns
   * `alreadyApplied: true` and creates no second version. With `fence` (a destination whose lock
   * the rotation holds: every destination; never a fallback), the write lands only while the
   * fence holds (invariant 9).
   */
  writeSecret(target: StoreTarget, record: SecretRecord, fence?: WriteFence): Promise<WriteResult>;

  /** Reads the stored secret back (for the digest check and the stored-secret probe). */
  readSecret(target: StoreTarget): Promise<StoredSecret | undefined>;

  /**
   * Optional. The value stored before the current one (Vault: the previous version; AWS:
   * AWSPREVIOUS; file: the copy kept beside it), so a two-slot entry can probe its standby slot.
   * Undefined when the backend keeps none or there was no earlier value.
   */
  readPrevious?(target: StoreTarget): Promise<StoredSecret | undefined>;
}

/**
 * Role: the key's lock at a target (invariant 5), kept alive through roll, store and verify and
 * checked by every fenced write (invariant 9). Callers: rotation/key-lock.ts and the lock keeper.
 */
export interface KeyLock extends BackendIdentity {
  /**
   * Optional, with reserveWrite. Takes, before the roll, the budget of one refresh of `lock` (the
   * engine refreshes every destination's lock after the primary's write when a key has more than
   * one destination, before the others are written): like the writes, that refresh must not wait
   * for a turn between the roll answer and the last destination's write (invariants 2 and 11).
   */
  reserveLockRefresh?(target: StoreTarget, lock: HeldLock): Promise<WriteReservation>;

  /**
   * Takes the key's lock (invariant 5). A lock held by another owner is taken over only past its
   * expiry, or when its owner is in `request.deadOwners`; a retried call with the same owner and
   * rotationId gets the lock again. A call that throws leaves no lock of this request behind where
   * it can tell: a lock write whose answer was lost is read back and returned as acquired, and a
   * lock taken before a later step failed is released, so the caller never holds a lock it does
   * not know about.
   */
  acquireLock(target: StoreTarget, request: LockRequest): Promise<LockOutcome>;
  /**
   * Extends a lock this process holds to `ttlMs` from now, only while it is still exactly that
   * lock (same holder and token or version): returns the lock as refreshed, or undefined when it
   * is no longer ours (released, or expired and taken over). Never creates a lock: a runner whose
   * lock was lost must stop, not take a fresh one (invariant 9). Throws only when the backend
   * cannot answer; the caller then treats the lock as unproven.
   */
  refreshLock(target: StoreTarget, lock: HeldLock, ttlMs: number): Promise<HeldLock | undefined>;
  /** Releases a lock this process holds; a lock that is no longer ours is left alone. */
  releaseLock(target: StoreTarget, lock: HeldLock): Promise<void>;
}

/**
 * Role: keyroll's bookkeeping beside the secret (the intent marker of invariant 6, the last
 * rotation, probe and failure) and the state read back from it for due-ness, recovery and
 * `status`. Changes are made under the key lock, except where recordsProbeWithoutLock says.
 */
export interface Records extends BackendIdentity {
  /** Writes the intent marker before the roll (invariant 6): a run that dies mid-rotation leaves it behind. */
  setIntent(target: StoreTarget, intent: Intent): Promise<void>;
  /** Clears the intent only when it still names `rotationId`. */
  clearIntent(target: StoreTarget, rotationId: string): Promise<void>;

  /** keyroll's bookkeeping at the target, as stored (trustState judges it: src/rotation/trusted-state.ts). */
  readState(target: StoreTarget): Promise<KeyState>;

  /**
   * Records a completed rotation (for due-ness and `status`). With `clearIntent`, also clears
   * the intent marker when it names `rotation.rotationId`, as clearIntent does, in the same
   * bookkeeping change where the backend can (one custom_metadata write on Vault, one tag call on
   * AWS, one sidecar write for files): the finish step is then one change, not two, and no crash
   * can land between recording the rotation and clearing its marker.
   */
  recordRotation(target: StoreTarget, rotation: RotationRecord, options?: RecordOptions): Promise<void>;

  /**
   * Records a drift probe of the stored secret (for `run`'s probe interval and `status`), changing
   * nothing but the probe's own record; best effort for the caller. Called without the key lock
   * where recordsProbeWithoutLock says so, else under it like every bookkeeping change.
   */
  recordProbe(
    target: StoreTarget,
    probe: ProbeRecord,
    options?: Pick<RecordOptions, 'releaseLock'>,
  ): Promise<void>;

  /**
   * Optional. True when recordProbe may run without the key lock, as drift probes do
   * (src/rotation/drift.ts): the record is one change of the probe's own field that no concurrent
   * bookkeeping change (a rotation's intent marker, its record) can undo or be undone by (AWS: a
   * tag of its own; OpenBao: a custom_metadata check-and-set; file: a change under the sidecar's
   * guard). Absent or false (HashiCorp Vault, whose custom_metadata write replaces the whole map
   * without a check): a probe is recorded under the key lock.
   */
  recordsProbeWithoutLock?(target: StoreTarget): boolean;

  /**
   * Records the last failure and its streak (for backoff, quarantine and `status`), replacing the
   * record before it whole and changing nothing else; best effort for the caller.
   */
  recordFailure(target: StoreTarget, failure: FailureRecord): Promise<void>;
}

/**
 * A store: every role above over one client (one folder per kind: aws/, vault/, file/). Callers
 * that use one role take that role's type, so what they may do to the store is in their signature.
 */
export interface Backend extends WriteCheck, SecretStore, KeyLock, Records {
  /**
   * Optional port: the store's own rotation (AWS Secrets Manager's, which runs keyroll's rotation
   * function: src/lambda/). Absent on stores that have none (vault, file).
   */
  readonly native?: NativeRotation;
  /** Gives back what the instance holds open (connections, timers); the instance is not used after. */
  close(): Promise<void>;
}
