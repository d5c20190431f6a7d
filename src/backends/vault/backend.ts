// The Vault / OpenBao KV v2 backend's class: check-and-set writes, keyroll's bookkeeping in the
// secret's custom_metadata, the lock as a sibling KV entry, token / Kubernetes / AppRole auth with
// renewal. Each method checks the target (target.ts), waits for the bookkeeping an earlier write
// left running on the path (write.ts), and hands the rest to the file of its concern: preflight.ts,
// write.ts, records.ts; the lock's protocol is lock.ts and takeover.ts, and what a lock change
// makes true of the path is decided here, through the transitions of known.ts.
import type { BackendOperation } from '../errors.ts';
import type {
  Backend,
  BackendDeps,
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
import { PathKnowledgeMap } from './known.ts';
import { KvV2, VaultSession, type KvMetadata } from './kv.ts';
import { acquireVaultLock, lockInfo, refreshVaultLock, releaseVaultLock } from './lock.ts';
import { preflight } from './preflight.ts';
import * as records from './records.ts';
import { moveVersionPastFormerHolder } from './takeover.ts';
import { kvPathOf } from './target.ts';
import * as write from './write.ts';
import { BookkeepingAfterWrites, type WriteContext } from './write.ts';

export class VaultBackend implements Backend {
  readonly kind = 'vault';
  readonly name: string;
  readonly #client: VaultClient;
  readonly #kv: KvV2;
  readonly #now: () => Date;
  /** What this process last saw or wrote per path: check-and-set bases, its lock, its bookkeeping. */
  readonly #known = new PathKnowledgeMap();
  /** The bookkeeping a write leaves running per path (write.ts): every later call on the path waits for it. */
  readonly #bookkeeping = new BookkeepingAfterWrites();
  /** What the operation files (records.ts, write.ts) work with. */
  readonly #context: WriteContext;

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
    const tokens = new VaultTokenSource({
      client: this.#client,
      auth: config.auth,
      backend: name,
      now: this.#now,
      env: deps.env ?? process.env,
    });
    this.#kv = new KvV2(new VaultSession(this.#client, tokens), config.mount);
    this.#context = { backend: name, kv: this.#kv, known: this.#known, bookkeeping: this.#bookkeeping };
  }

  async preflight(target: StoreTarget): Promise<PreflightResult> {
    return preflight(this.#context, await this.#settledPath(target, 'preflight'));
  }

  async ensureFresh(minValidityMs: number): Promise<void> {
    await this.#kv.ensureFreshToken(minValidityMs);
  }

  async acquireLock(target: StoreTarget, request: LockRequest): Promise<LockOutcome> {
    const path = await this.#settledPath(target, 'lock');
    const known = this.#known.of(path);
    const ours = known.heldLock;
    const refreshing = ours?.lock.owner === request.owner && ours.lock.rotationId === request.rotationId;
    const result = await acquireVaultLock(
      this.#kv,
      path,
      request,
      this.#now(),
      known.lockWriteStarting(refreshing),
    );
    if (!result.acquired) {
      // Busy for this request. Unless the entry still holds the lock this process holds, that
      // lock is gone (taken over), and so is what was true under it.
      if (ours !== undefined && result.entry?.lock?.token !== ours.lock.token)
        known.lostLock(ours.lock.token);
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
    if (!refreshing) known.stateReadUnderLock(records.stateOf(metadata, lockInfo(result.entry)));
    return result.outcome;
  }

  /** takeover.ts; a failure gives the lock back, as a failed metadata read does. */
  async #moveVersionPastFormerHolder(
    target: StoreTarget,
    path: string,
    lock: HeldLock,
  ): Promise<number | { lostTo: LockInfo }> {
    try {
      const moved = await moveVersionPastFormerHolder(
        this.#kv,
        path,
        lock,
        (patch) => records.changeMetadata(this.#context, path, patch, 'lock'),
        this.name,
      );
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
    const refreshed = await refreshVaultLock(
      this.#kv,
      path,
      lock,
      ttlMs,
      this.#now(),
      known.heldEntryWith(lock.token),
    );
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
    return write.writeSecret(this.#context, await this.#settledPath(target, 'write'), target, record, fence);
  }

  async readSecret(target: StoreTarget): Promise<StoredSecret | undefined> {
    return write.readSecret(this.#context, await this.#settledPath(target, 'read'), target);
  }

  async readPrevious(target: StoreTarget): Promise<StoredSecret | undefined> {
    return write.readPrevious(this.#context, await this.#settledPath(target, 'read'), target);
  }

  async readState(target: StoreTarget): Promise<KeyState> {
    return records.readState(this.#context, await this.#settledPath(target, 'state'));
  }

  async recordRotation(
    target: StoreTarget,
    rotation: RotationRecord,
    options: { clearIntent?: boolean } = {},
  ): Promise<void> {
    await records.recordRotation(this.#context, await this.#settledPath(target, 'record'), rotation, options);
  }

  /**
   * The probe's key alone, in a custom_metadata write the server checks against the metadata it
   * was made from (OpenBao): no lock needed. HashiCorp Vault replaces the whole map unchecked, and a
   * rotation's intent marker written between the read and the write would be lost: under the lock.
   */
  recordsProbeWithoutLock(): boolean {
    return this.#kv.checksMetadataWrites;
  }

  async recordProbe(target: StoreTarget, probe: ProbeRecord): Promise<void> {
    await records.recordProbe(this.#context, await this.#settledPath(target, 'record'), probe);
  }

  async recordFailure(target: StoreTarget, failure: FailureRecord): Promise<void> {
    await records.recordFailure(this.#context, await this.#settledPath(target, 'record'), failure);
  }

  async close(): Promise<void> {
    await this.#bookkeeping.settleAll();
    await this.#client.close();
  }

  /** The KV path of `target`, once the bookkeeping of an earlier write to it has finished. */
  async #settledPath(target: StoreTarget, operation: BackendOperation): Promise<string> {
    const path = this.#path(target, operation);
    await this.#bookkeeping.running(path);
    return path;
  }

  #path(target: StoreTarget, operation: BackendOperation): string {
    return kvPathOf(target, this.name, operation);
  }
}
