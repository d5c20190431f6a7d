// The Vault / OpenBao KV v2 backend's class: check-and-set writes, keyroll's bookkeeping in the
// secret's custom_metadata, the lock as a sibling KV entry, token / Kubernetes / AppRole auth with
// renewal.
import type { BackendOperation } from '../errors.ts';
import type { BackendDeps } from '../registry.ts';
import { parseStoredValue, renderMap } from '../render.ts';
import type {
  Backend,
  FailureRecord,
  HeldLock,
  Intent,
  KeyState,
  LockInfo,
  LockOutcome,
  LockRequest,
  PreflightResult,
  ProbeRecord,
  RotationRecord,
  SecretRecord,
  StoreTarget,
  StoredSecret,
  WriteFence,
  WriteResult,
} from '../types.ts';
import { VaultTokenSource } from './auth.ts';
import { VaultClient } from './client.ts';
import type { VaultBackendConfig } from './config.ts';
import { KvV2, VaultSession, type CustomMetadataPatch, type KvData, type KvMetadata } from './kv.ts';
import { LOCK_LOST, refusedWriteError } from './errors.ts';
import { whyFencedWriteRefused } from './fence.ts';
import { PathKnowledgeMap } from './known.ts';
import { acquireVaultLock, lockInfo, refreshVaultLock, releaseVaultLock } from './lock.ts';
import { checkCapabilities } from './preflight.ts';
import { copiedFrom, moveVersionPastFormerHolder } from './takeover.ts';
import * as records from './records.ts';
import { META, stateOf, writerOf, type RecordsContext } from './records.ts';
import { kvPathOf } from './target.ts';

export class VaultBackend implements Backend {
  readonly kind = 'vault';
  readonly name: string;
  readonly #client: VaultClient;
  readonly #kv: KvV2;
  readonly #now: () => Date;
  /** What this process last saw or wrote per path: check-and-set bases, its lock, its bookkeeping. */
  readonly #known = new PathKnowledgeMap();
  /**
   * The bookkeeping a write leaves running per path (when no intent marker of this process already
   * names the version it wrote). writeSecret returns as soon as the secret is durable, so the
   * exposure window is the one data write, not that write plus the metadata change naming its
   * rotation; every later call on the path waits for this first, so the custom_metadata changes
   * never interleave and readers see what the write recorded.
   */
  readonly #bookkeeping = new Map<string, Promise<void>>();
  /** What the operation files (records.ts) work with. */
  readonly #context: RecordsContext;

  constructor(name: string, config: VaultBackendConfig, deps: BackendDeps = {}) {
    this.name = name;
    this.#now = deps.now ?? (() => new Date());
    this.#client = new VaultClient({
      backend: name,
      address: config.address,
      timeoutMs: config.timeoutMs,
      ...(config.namespace === undefined ? {} : { namespace: config.namespace }),
      ...(config.caFile === undefined ? {} : { caFile: config.caFile }),
      ...(deps.dispatcher === undefined ? {} : { dispatcher: deps.dispatcher }),
      ...(config.quotas === undefined ? {} : { quotaWaitMs: config.quotas.maxWaitMs }),
      ...(deps.quota?.observer === undefined ? {} : { quotaObserver: deps.quota.observer }),
    });
    const tokens = new VaultTokenSource({ client: this.#client, auth: config.auth, backend: name, now: this.#now, env: deps.env ?? process.env });
    this.#kv = new KvV2(new VaultSession(this.#client, tokens), config.mount);
    this.#context = { kv: this.#kv, known: this.#known };
  }

  async preflight(target: StoreTarget): Promise<PreflightResult> {
    const path = await this.#settledPath(target, 'preflight');
    const token = await this.#kv.tokenLookup('preflight', path);
    const checks = [`token valid (policies: ${token.policies.join(', ') || 'none'}; ttl ${token.ttl === 0 ? 'none' : `${String(token.ttl)}s`})`];
    // The read proves the secret readable (the verify step and recovery read it back) and gives
    // its current version. An answer with a version means a metadata entry exists too; a plain 404
    // leaves that open (an entry with only custom_metadata answers the same).
    const current = await this.#kv.readData(path, 'preflight');
    const exists = current !== undefined && current.data !== undefined;
    checks.push(...(await checkCapabilities(this.#kv, path, { exists, metadataExists: current !== undefined, backend: this.name })));
    this.#known.of(path).preflightRead(current === undefined ? undefined : current.version);
    checks.push(current !== undefined && exists ? `read ${this.#kv.apiPath('data', path)} (version ${String(current.version)})` : `${this.#kv.apiPath('data', path)} does not exist yet`);
    return { exists, checks };
  }

  async ensureFresh(minValidityMs: number): Promise<void> {
    await this.#kv.ensureFreshToken(minValidityMs);
  }

  async acquireLock(target: StoreTarget, request: LockRequest): Promise<LockOutcome> {
    const path = await this.#settledPath(target, 'lock');
    const known = this.#known.of(path);
    const ours = known.heldLock;
    const refreshing = ours?.lock.owner === request.owner && ours.lock.rotationId === request.rotationId;
    const result = await acquireVaultLock(this.#kv, path, request, this.#now(), known.lockWriteStarting(refreshing));
    if (!result.acquired) {
      // Busy for this request. Unless the entry still holds the lock this process holds, that
      // lock is gone (taken over), and so is what was true under it.
      if (ours !== undefined && result.entry?.lock?.token !== ours.lock.token) known.lostLock(ours.lock.token);
      return result.outcome;
    }
    // A refresh written against the entry this process wrote when it took the lock: nothing to read.
    if (refreshing && result.unread && known.refreshedUnread(result.entry)) return result.outcome;
    known.tookLock(result.entry);
    let metadata: KvMetadata | undefined;
    try {
      metadata = await this.#kv.readMetadata(path, 'lock');
    } catch (error) {
      // The caller gets an error, not the lock, so it would never release it: the next runner
      // (the on-call's immediate retry) would find the key busy for a whole TTL. Give it back.
      await this.releaseLock(target, result.outcome.lock).catch(() => undefined);
      throw error;
    }
    // Read under the lock: the version the write after the roll checks-and-sets against, the base
    // of the bookkeeping changes, and the state the engine reads next to decide again.
    known.readUnderLock(metadata);
    if (result.outcome.lock.tookOver) {
      // The runner whose lock this was may still hold a fenced write against that version: move
      // the version past it before anything else (takeover.ts, invariant 9).
      const moved = await this.#moveVersionPastFormerHolder(target, path, result.outcome.lock);
      if (typeof moved !== 'number') return { acquired: false, holder: moved.lostTo };
      known.movedVersionPastFormerHolder(moved);
    }
    // custom_metadata keys the state does not read may have changed since (takeover.ts); the state holds.
    if (!refreshing) known.stateReadUnderLock(stateOf(metadata, lockInfo(result.entry)));
    return result.outcome;
  }

  /** takeover.ts; a failure gives the lock back, as a failed metadata read does. */
  async #moveVersionPastFormerHolder(target: StoreTarget, path: string, lock: HeldLock): Promise<number | { lostTo: LockInfo }> {
    try {
      const moved = await moveVersionPastFormerHolder(this.#kv, path, lock, (patch) => this.#changeMetadata(path, patch, 'lock'), this.name);
      if (typeof moved !== 'number') this.#known.of(path).lostLock(lock.token);
      return moved;
    } catch (error) {
      await this.releaseLock(target, lock).catch(() => undefined);
      throw error;
    }
  }

  async refreshLock(target: StoreTarget, lock: HeldLock, ttlMs: number): Promise<HeldLock | undefined> {
    const path = await this.#settledPath(target, 'lock');
    const known = this.#known.of(path);
    const refreshed = await refreshVaultLock(this.#kv, path, lock, ttlMs, this.#now(), known.heldEntryWith(lock.token));
    if (refreshed === undefined) {
      known.lostLock(lock.token);
      return undefined;
    }
    known.refreshedLock(refreshed.entry);
    const { owner, rotationId, expiresAt } = refreshed.entry.lock;
    return { owner, rotationId, expiresAt, token: lock.token, tookOver: lock.tookOver };
  }

  async releaseLock(target: StoreTarget, lock: HeldLock): Promise<void> {
    const path = this.#path(target, 'unlock');
    await releaseVaultLock(this.#kv, path, lock, this.#known.of(path).releasingLock(lock.token));
  }

  async setIntent(target: StoreTarget, intent: Intent): Promise<void> {
    await records.setIntent(this.#context, await this.#settledPath(target, 'intent'), intent);
  }

  async clearIntent(target: StoreTarget, rotationId: string): Promise<void> {
    await records.clearIntent(this.#context, await this.#settledPath(target, 'intent'), rotationId);
  }

  async writeSecret(target: StoreTarget, record: SecretRecord, fence?: WriteFence): Promise<WriteResult> {
    const path = await this.#settledPath(target, 'write');
    const known = this.#known.of(path);
    // A lock this process already knows it lost: refused with no request (invariant 9).
    if (fence !== undefined && known.hasLost(fence.lock.token)) throw refusedWriteError(this.name, path, 'KR_LOCK_LOST', LOCK_LOST);
    if (known.lastWroteFor(record.rotationId)) {
      const applied = await this.#appliedVersion(path, target, record);
      if (applied !== undefined) return { version: String(applied), alreadyApplied: true };
    }
    let cas = known.expectedVersion;
    if (cas === undefined) {
      // A fenced write checks-and-sets against the version read under the lock, never against one
      // read now: that read could see a new holder's write, and the write would replace it.
      if (fence !== undefined) throw refusedWriteError(this.name, path, 'KR_LOCK_LOST', 'no version of the secret was read under the lock');
      // No preflight or lock in this process: look once (tests, direct callers).
      const current = await this.#kv.readData(path, 'write');
      if (current !== undefined && this.#holds(current, target, record)) return { version: String(current.version), alreadyApplied: true };
      cas = current?.version ?? 0;
    }
    known.writingData();
    // `until-expiry`: a token past 2/3 of its TTL is not renewed here, before the write
    // (invariant 2); ensureFresh renewed it before the roll. Only an expired one is replaced.
    const written = await this.#kv.writeData(path, renderMap(target.shape, record), cas, 'write', 'until-expiry');
    if (written === 'cas-mismatch') {
      // Either an earlier attempt of this write landed (its answer was lost) or someone else wrote.
      // Unfenced, a retry reads afresh. Fenced, the version read under the lock stays the base, so
      // a retry is refused the same way (invariant 9).
      if (fence === undefined) known.unfencedWriteRefused();
      const applied = await this.#appliedVersion(path, target, record);
      if (applied !== undefined) return { version: String(applied), alreadyApplied: true };
      // Fenced: after the refused write, so no request comes before the write (invariant 2), the
      // lock says whether a new holder wrote (lost) or someone outside keyroll's lock did.
      if (fence !== undefined && (await whyFencedWriteRefused(this.#kv, path, fence)) === 'lock-lost') {
        known.lostLock(fence.lock.token);
        throw refusedWriteError(this.name, path, 'KR_LOCK_LOST', LOCK_LOST);
      }
      throw refusedWriteError(this.name, path, 'KR_BACKEND_CONFLICT', `another writer changed it since version ${String(cas)}`);
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
    const bookkeeping: Promise<void> = this.#changeMetadata(
      path,
      () => ({ [META.lastWriteRotationId]: record.rotationId, [META.lastWriteVersion]: String(written.version) }),
      'write',
    )
      .catch(() => undefined)
      .finally(() => {
        if (this.#bookkeeping.get(path) === bookkeeping) this.#bookkeeping.delete(path);
      });
    this.#bookkeeping.set(path, bookkeeping);
    return { version: String(written.version), alreadyApplied: false };
  }

  async readSecret(target: StoreTarget): Promise<StoredSecret | undefined> {
    const path = await this.#settledPath(target, 'read');
    const current = await this.#kv.readData(path, 'read');
    if (current?.data === undefined) return undefined;
    const parsed = parseStoredValue(target.shape, current.data);
    if (parsed === undefined) return undefined;
    const rotationId = parsed.rotationId ?? writerOf(current.customMetadata, current.version);
    return { secret: parsed.secret, version: String(current.version), ...(rotationId === undefined ? {} : { rotationId }) };
  }

  /**
   * The value the latest write replaced (a two-slot entry's standby secret, invariant 10): the
   * version before the current one, or before the version the current one copies when it is a
   * takeover's copy (takeover.ts: a copy replaced nothing). Two reads, the metadata for the current
   * version number and the copy record (it carries no secret, so the current secret is not fetched
   * for nothing), then that version's data. Undefined when there is none, or it was deleted,
   * destroyed or dropped by `max_versions`.
   */
  async readPrevious(target: StoreTarget): Promise<StoredSecret | undefined> {
    const path = await this.#settledPath(target, 'read');
    const metadata = await this.#kv.readMetadata(path, 'read');
    if (metadata === undefined) return undefined;
    const before = (copiedFrom(metadata.customMetadata, metadata.currentVersion) ?? metadata.currentVersion) - 1;
    if (before < 1) return undefined;
    const previous = await this.#kv.readData(path, 'read', before);
    if (previous?.data === undefined) return undefined;
    const parsed = parseStoredValue(target.shape, previous.data);
    if (parsed === undefined) return undefined;
    const rotationId = parsed.rotationId ?? writerOf(metadata.customMetadata, previous.version);
    return { secret: parsed.secret, version: String(previous.version), ...(rotationId === undefined ? {} : { rotationId }), ...(parsed.keyId === undefined ? {} : { keyId: parsed.keyId }) };
  }

  async readState(target: StoreTarget): Promise<KeyState> {
    return records.readState(this.#context, await this.#settledPath(target, 'state'));
  }

  async recordRotation(target: StoreTarget, rotation: RotationRecord, options: { clearIntent?: boolean } = {}): Promise<void> {
    await records.recordRotation(this.#context, await this.#settledPath(target, 'record'), rotation, options);
  }

  async recordProbe(target: StoreTarget, probe: ProbeRecord): Promise<void> {
    await records.recordProbe(this.#context, await this.#settledPath(target, 'record'), probe);
  }

  async recordFailure(target: StoreTarget, failure: FailureRecord): Promise<void> {
    await records.recordFailure(this.#context, await this.#settledPath(target, 'record'), failure);
  }

  async close(): Promise<void> {
    await Promise.all(this.#bookkeeping.values());
    await this.#client.close();
  }

  async #changeMetadata(path: string, patch: (current: Record<string, string>) => CustomMetadataPatch, operation: BackendOperation): Promise<void> {
    await records.changeMetadata(this.#context, path, patch, operation);
  }

  /** The version now holding this record's secret, if the latest version does. */
  async #appliedVersion(path: string, target: StoreTarget, record: SecretRecord): Promise<number | undefined> {
    const current = await this.#kv.readData(path, 'write');
    if (current === undefined || !this.#holds(current, target, record)) return undefined;
    this.#known.of(path).foundWriteApplied(current.version);
    return current.version;
  }

  /** The secret is unique to its roll, so finding it stored means this rotation's write landed. */
  #holds(current: KvData, target: StoreTarget, record: SecretRecord): boolean {
    if (current.data === undefined) return false;
    return parseStoredValue(target.shape, current.data)?.secret.equals(record.secret) === true;
  }

  /** The KV path of `target`, once the bookkeeping of an earlier write to it has finished. */
  async #settledPath(target: StoreTarget, operation: BackendOperation): Promise<string> {
    const path = this.#path(target, operation);
    await this.#bookkeeping.get(path);
    return path;
  }

  #path(target: StoreTarget, operation: BackendOperation): string {
    return kvPathOf(target, this.name, operation);
  }
}
