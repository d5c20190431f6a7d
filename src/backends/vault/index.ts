// The Vault / OpenBao KV v2 backend: check-and-set writes, keyroll's bookkeeping in the secret's
// custom_metadata, the lock as a sibling KV entry, token / Kubernetes / AppRole auth with renewal.
import { BackendError, type BackendOperation } from '../errors.ts';
import type { BackendDeps, BackendFactory } from '../registry.ts';
import { parseStoredValue, renderMap } from '../render.ts';
import type {
  Backend,
  FailureRecord,
  HeldLock,
  Intent,
  KeyState,
  LockOutcome,
  LockRequest,
  PreflightResult,
  RotationRecord,
  SecretRecord,
  StoreTarget,
  StoredSecret,
  WriteResult,
} from '../types.ts';
import { VaultTokenSource } from './auth.ts';
import { VaultClient } from './client.ts';
import type { VaultBackendConfig } from './config.ts';
import { isValidKvPath, KvV2, VaultSession, type KvData } from './kv.ts';
import { acquireVaultLock, lockPathFor, readVaultLock, releaseVaultLock } from './lock.ts';
import { checkCapabilities } from './preflight.ts';
import { encodeFailure, encodeIntent, META, readIntent, stateFromMetadata } from './state.ts';

export const createVaultBackend: BackendFactory<'vault'> = (name, config, deps) => new VaultBackend(name, config, deps);

export class VaultBackend implements Backend {
  readonly kind = 'vault';
  readonly name: string;
  readonly #client: VaultClient;
  readonly #kv: KvV2;
  readonly #now: () => Date;
  /**
   * The version each path had when this process last looked (preflight, lock) or wrote: the
   * check-and-set value of the next write, so the write after the roll is one request
   * (invariant 2) and a write by anyone else in between is detected, never overwritten.
   */
  readonly #expectedVersion = new Map<string, number>();
  /** What this process last wrote per path, so a retried write can answer alreadyApplied. */
  readonly #lastWrite = new Map<string, { rotationId: string; version: number }>();
  /**
   * The bookkeeping a write leaves running per path. writeSecret returns as soon as the secret is
   * durable, so the exposure window is the one data write, not that write plus the two metadata
   * requests naming its rotation; every later call on the path waits for this first, so the
   * custom_metadata read-modify-writes never interleave and readers see what the write recorded.
   */
  readonly #bookkeeping = new Map<string, Promise<void>>();

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
    });
    const tokens = new VaultTokenSource({ client: this.#client, auth: config.auth, backend: name, now: this.#now, env: deps.env ?? process.env });
    this.#kv = new KvV2(new VaultSession(this.#client, tokens), config.mount);
  }

  async preflight(target: StoreTarget): Promise<PreflightResult> {
    const path = await this.#settledPath(target, 'preflight');
    const token = await this.#kv.tokenLookup('preflight', path);
    const checks = [`token valid (policies: ${token.policies.join(', ') || 'none'}; ttl ${token.ttl === 0 ? 'none' : `${String(token.ttl)}s`})`];
    const [current, metadata] = await Promise.all([this.#kv.readData(path, 'preflight'), this.#kv.readMetadata(path, 'preflight')]);
    const exists = current !== undefined && current.data !== undefined;
    checks.push(...(await checkCapabilities(this.#kv, path, { exists, metadataExists: metadata !== undefined, backend: this.name })));
    this.#expectedVersion.set(path, metadata?.currentVersion ?? 0);
    checks.push(current !== undefined && exists ? `read ${this.#kv.apiPath('data', path)} (version ${String(current.version)})` : `${this.#kv.apiPath('data', path)} does not exist yet`);
    return { exists, checks };
  }

  async ensureFresh(minValidityMs: number): Promise<void> {
    await this.#kv.ensureFreshToken(minValidityMs);
  }

  async acquireLock(target: StoreTarget, request: LockRequest): Promise<LockOutcome> {
    const path = await this.#settledPath(target, 'lock');
    const outcome = await acquireVaultLock(this.#kv, path, request, this.#now());
    if (!outcome.acquired) return outcome;
    try {
      // The version the write after the roll will check-and-set against, seen under the lock.
      this.#expectedVersion.set(path, (await this.#kv.readMetadata(path, 'lock'))?.currentVersion ?? 0);
    } catch (error) {
      // The caller gets an error, not the lock, so it would never release it: the next runner
      // (the on-call's immediate retry) would find the key busy for a whole TTL. Give it back.
      await releaseVaultLock(this.#kv, path, outcome.lock).catch(() => undefined);
      throw error;
    }
    return outcome;
  }

  async releaseLock(target: StoreTarget, lock: HeldLock): Promise<void> {
    await releaseVaultLock(this.#kv, this.#path(target, 'unlock'), lock);
  }

  async setIntent(target: StoreTarget, intent: Intent): Promise<void> {
    const path = await this.#settledPath(target, 'intent');
    await this.#kv.updateCustomMetadata(path, () => ({ [META.intent]: encodeIntent(intent) }), 'intent');
  }

  async clearIntent(target: StoreTarget, rotationId: string): Promise<void> {
    const path = await this.#settledPath(target, 'intent');
    const metadata = await this.#kv.readMetadata(path, 'intent');
    if (metadata === undefined || readIntent(metadata.customMetadata)?.rotationId !== rotationId) return;
    await this.#kv.updateCustomMetadata(
      path,
      // Re-checked on the fresh read, so an intent set meanwhile by another rotation stays.
      (meta) => (readIntent(meta)?.rotationId === rotationId ? { [META.intent]: null } : undefined),
      'intent',
    );
  }

  async writeSecret(target: StoreTarget, record: SecretRecord): Promise<WriteResult> {
    const path = await this.#settledPath(target, 'write');
    const previous = this.#lastWrite.get(path);
    if (previous?.rotationId === record.rotationId) {
      const applied = await this.#appliedVersion(path, target, record);
      if (applied !== undefined) return { version: String(applied), alreadyApplied: true };
    }
    let cas = this.#expectedVersion.get(path);
    if (cas === undefined) {
      // No preflight or lock in this process: look once (tests, direct callers).
      const current = await this.#kv.readData(path, 'write');
      if (current !== undefined && this.#holds(current, target, record)) return { version: String(current.version), alreadyApplied: true };
      cas = current?.version ?? 0;
    }
    // `until-expiry`: a token past 2/3 of its TTL is not renewed here, before the write
    // (invariant 2); ensureFresh renewed it before the roll. Only an expired one is replaced.
    const written = await this.#kv.writeData(path, renderMap(target.shape, record), cas, 'write', 'until-expiry');
    if (written === 'cas-mismatch') {
      // Either an earlier attempt of this write landed (its answer was lost) or someone else wrote.
      this.#expectedVersion.delete(path);
      const applied = await this.#appliedVersion(path, target, record);
      if (applied !== undefined) return { version: String(applied), alreadyApplied: true };
      throw new BackendError('KR_BACKEND_CONFLICT', `vault backend ${this.name}: write of ${path} failed, another writer changed it since version ${String(cas)}`, {
        backend: this.name,
        kind: 'vault',
        operation: 'write',
        path,
        status: 400,
      });
    }
    this.#expectedVersion.set(path, written.version);
    this.#lastWrite.set(path, { rotationId: record.rotationId, version: written.version });
    // After the durable write, so it adds no I/O before it (invariant 2), and not awaited here, so
    // it adds no time to the exposure window either. Best effort: readSecret falls back to the
    // value itself, and the secret is already safe.
    const bookkeeping: Promise<void> = this.#kv
      .updateCustomMetadata(
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
    const version = String(current.version);
    const writtenBy = current.customMetadata[META.lastWriteVersion] === version ? current.customMetadata[META.lastWriteRotationId] : undefined;
    const rotationId = parsed.rotationId ?? writtenBy;
    return { secret: parsed.secret, version, ...(rotationId === undefined ? {} : { rotationId }) };
  }

  async readState(target: StoreTarget): Promise<KeyState> {
    const path = await this.#settledPath(target, 'state');
    const [metadata, lock] = await Promise.all([this.#kv.readMetadata(path, 'state'), readVaultLock(this.#kv, path)]);
    return {
      exists: metadata?.liveCurrentVersion ?? false,
      ...stateFromMetadata(metadata?.customMetadata ?? {}),
      ...(lock === undefined ? {} : { lock }),
    };
  }

  async recordRotation(target: StoreTarget, rotation: RotationRecord, options: { clearIntent?: boolean } = {}): Promise<void> {
    const path = await this.#settledPath(target, 'record');
    await this.#kv.updateCustomMetadata(
      path,
      (meta) => ({
        [META.lastRotatedAt]: rotation.rotatedAt,
        [META.lastRotationId]: rotation.rotationId,
        [META.lastRotationVersion]: rotation.version,
        // Checked on the fresh read, so an intent set meanwhile by another rotation stays.
        ...(options.clearIntent === true && readIntent(meta)?.rotationId === rotation.rotationId ? { [META.intent]: null } : {}),
      }),
      'record',
    );
  }

  async recordFailure(target: StoreTarget, failure: FailureRecord): Promise<void> {
    const path = await this.#settledPath(target, 'record');
    // Only the lastFailure key: an intent marker or lock-holder bookkeeping written meanwhile stays.
    await this.#kv.updateCustomMetadata(path, () => ({ [META.lastFailure]: encodeFailure(failure) }), 'record');
  }

  async close(): Promise<void> {
    await Promise.all(this.#bookkeeping.values());
    await this.#client.close();
  }

  /** The version now holding this record's secret, if the latest version does. */
  async #appliedVersion(path: string, target: StoreTarget, record: SecretRecord): Promise<number | undefined> {
    const current = await this.#kv.readData(path, 'write');
    if (current === undefined || !this.#holds(current, target, record)) return undefined;
    this.#expectedVersion.set(path, current.version);
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
    const path = target.path.replace(/^\/+|\/+$/g, '');
    if (!isValidKvPath(path) || path.endsWith(lockPathFor(''))) {
      throw new BackendError('KR_BACKEND_INVALID_TARGET', `vault backend ${this.name}: ${operation} of ${JSON.stringify(target.path)} failed, not a usable KV path`, {
        backend: this.name,
        kind: 'vault',
        operation,
        path: target.path,
      });
    }
    return path;
  }
}
