// KV v2 operations keyroll needs, on top of the client: read/write a path's data with
// check-and-set, read its metadata, change keys of its custom_metadata, and ask which
// capabilities the token has. Every call goes through `VaultSession`, which attaches a valid token.
import type { BackendOperation } from '../errors.ts';
import type { VaultAnswer, VaultCall, VaultClient, VaultMethod } from './client.ts';
import type { TokenLookup, TokenUse, VaultTokenSource } from './auth.ts';
import { encodeMount } from './auth.ts';
import {
  CapabilitiesResponse,
  KvMetadataResponse,
  KvReadResponse,
  KvWriteResponse,
  TokenLookupResponse,
} from './schema.ts';

/** Sends calls with a valid token; one 403 after a login is retried with a fresh login. */
export class VaultSession {
  readonly client: VaultClient;
  readonly tokens: VaultTokenSource;

  constructor(client: VaultClient, tokens: VaultTokenSource) {
    this.client = client;
    this.tokens = tokens;
  }

  async send(
    method: VaultMethod,
    apiPath: string,
    operation: BackendOperation,
    target: string,
    body?: unknown,
    tokenUse: TokenUse = 'renew-when-due',
  ): Promise<{ call: VaultCall; answer: VaultAnswer }> {
    const token = await this.tokens.token(operation, target, tokenUse);
    const call: VaultCall = {
      method,
      apiPath,
      operation,
      target,
      token,
      ...(body === undefined ? {} : { body }),
    };
    let answer = await this.client.send(call);
    // A login token revoked or expired behind our back: a 403 is not applied, so one retry is safe.
    if (answer.status === 403 && this.tokens.method !== 'token') {
      this.tokens.invalidate();
      call.token = await this.tokens.token(operation, target);
      answer = await this.client.send(call);
    }
    return { call, answer };
  }
}

export interface KvData {
  /** The version's data map; undefined when the latest version is deleted or destroyed. */
  data: Record<string, unknown> | undefined;
  version: number;
  customMetadata: Record<string, string>;
}

export interface KvMetadata {
  currentVersion: number;
  /** OpenBao's metadata version (check-and-set of metadata writes); undefined on Vault. */
  metadataVersion: number | undefined;
  customMetadata: Record<string, string>;
  /** True when the current version exists and is neither deleted nor destroyed. */
  liveCurrentVersion: boolean;
}

const CAS_MISMATCH = /check-and-set|did not match the current version/i;
const METADATA_CAS_MISMATCH = /metadata check-and-set/i;
/** Rounds of a custom_metadata change that keeps losing its check-and-set to other writers. */
const METADATA_ROUNDS = 5;

/** Keys to set (a string) or remove (null) in custom_metadata; undefined when nothing changes. */
export type CustomMetadataPatch = Record<string, string | null> | undefined;

/**
 * A path's custom_metadata as this process last read or wrote it, with the metadata version a
 * change checks-and-sets against; `metadata` undefined: none existed.
 */
export interface KnownMetadata {
  metadata: Pick<KvMetadata, 'metadataVersion' | 'customMetadata'> | undefined;
}

export class KvV2 {
  readonly #session: VaultSession;
  readonly #mount: string;
  /**
   * Whether the server checks-and-sets metadata writes (OpenBao answers `current_metadata_version`;
   * HashiCorp Vault does not), learned from the first metadata read that found an entry.
   */
  #metadataCas: boolean | undefined;

  constructor(session: VaultSession, mount: string) {
    this.#session = session;
    this.#mount = encodeMount(mount);
  }

  /** The API path (no /v1/) for `kind` of `path`, also the form capabilities-self expects. */
  apiPath(kind: 'data' | 'metadata', path: string): string {
    return `${this.#mount}/${kind}/${encodePath(path)}`;
  }

  /**
   * The latest version (or `version`), undefined when nothing was ever written, all was deleted,
   * or that version does not exist (any more: `max_versions` drops the oldest). A deleted or
   * destroyed version reads with `data` undefined.
   */
  async readData(path: string, operation: BackendOperation, version?: number): Promise<KvData | undefined> {
    const apiPath =
      version === undefined
        ? this.apiPath('data', path)
        : `${this.apiPath('data', path)}?version=${String(version)}`;
    const { call, answer } = await this.#session.send('GET', apiPath, operation, path);
    if (answer.status === 404) {
      // A deleted latest version answers 404 with its metadata; plain absence has no data.
      const deleted = KvReadResponse.safeParse(answer.body);
      if (!deleted.success) return undefined;
      return {
        data: undefined,
        version: deleted.data.data.metadata.version,
        customMetadata: deleted.data.data.metadata.custom_metadata ?? {},
      };
    }
    if (answer.status !== 200) throw this.#session.client.httpError(call, answer);
    const { data } = this.#session.client.parse(call, answer, KvReadResponse);
    return {
      data: data.data ?? undefined,
      version: data.metadata.version,
      customMetadata: data.metadata.custom_metadata ?? {},
    };
  }

  /**
   * Writes a new version if the current one is still `cas` (0: only if none exists). The write
   * after the roll passes `until-expiry`, so no token renewal comes before it (invariant 2).
   */
  async writeData(
    path: string,
    data: Record<string, unknown>,
    cas: number,
    operation: BackendOperation,
    tokenUse: TokenUse = 'renew-when-due',
  ): Promise<{ version: number } | 'cas-mismatch'> {
    const { call, answer } = await this.#session.send(
      'POST',
      this.apiPath('data', path),
      operation,
      path,
      { options: { cas }, data },
      tokenUse,
    );
    if (answer.status === 400 && CAS_MISMATCH.test(JSON.stringify(answer.body ?? ''))) return 'cas-mismatch';
    if (answer.status !== 200) throw this.#session.client.httpError(call, answer);
    return { version: this.#session.client.parse(call, answer, KvWriteResponse).data.version };
  }

  async readMetadata(path: string, operation: BackendOperation): Promise<KvMetadata | undefined> {
    const { call, answer } = await this.#session.send('GET', this.apiPath('metadata', path), operation, path);
    if (answer.status === 404) return undefined;
    if (answer.status !== 200) throw this.#session.client.httpError(call, answer);
    const { data } = this.#session.client.parse(call, answer, KvMetadataResponse);
    this.#metadataCas = data.current_metadata_version !== undefined;
    const current = data.versions?.[String(data.current_version)];
    const live =
      data.current_version > 0 &&
      current !== undefined &&
      (current.deletion_time ?? '') === '' &&
      current.destroyed !== true;
    return {
      currentVersion: data.current_version,
      metadataVersion: data.current_metadata_version,
      customMetadata: data.custom_metadata ?? {},
      liveCurrentVersion: live,
    };
  }

  /**
   * Changes only the custom_metadata keys `patch` names, keeping every other key: keyroll's
   * other bookkeeping written meanwhile by another runner (an intent marker) and an operator's
   * own keys. A metadata write replaces custom_metadata as a whole, so each round applies the patch
   * to the map as read and writes it back at once. On OpenBao the write is a check-and-set against
   * the metadata version read (`metadata_cas`; 0 = only if no metadata exists), so a write that
   * lost against another writer is redone on a fresh read. There the first round may start from
   * `known` (what this process last read or wrote, under its lock) instead of reading: the server
   * refuses the write if anything changed since, and the next round reads. HashiCorp Vault has no
   * metadata check-and-set (it ignores the parameter): there every round reads first, and a writer
   * between the read and the write can still be overwritten, which is why bookkeeping of a key is
   * changed under its lock. `patch` sees the map each round; undefined = no change. Returns the
   * custom_metadata as it stands after the change, with the metadata version the server gave it
   * (OpenBao counts one per metadata write; a data write leaves it as it is).
   */
  async updateCustomMetadata(
    path: string,
    patch: (current: Record<string, string>) => CustomMetadataPatch,
    operation: BackendOperation,
    known?: KnownMetadata,
  ): Promise<KnownMetadata> {
    let lost: { call: VaultCall; answer: VaultAnswer } | undefined;
    for (let round = 0; round < METADATA_ROUNDS; round++) {
      const metadata =
        round === 0 && known !== undefined && this.#canCheckAndSet(known)
          ? known.metadata
          : await this.readMetadata(path, operation);
      const current = metadata?.customMetadata ?? {};
      const changes = patch({ ...current });
      if (changes === undefined || !changesAnything(current, changes)) return { metadata };
      const cas = metadata === undefined ? 0 : metadata.metadataVersion;
      const customMetadata = applyPatch(current, changes);
      const body = { custom_metadata: customMetadata, ...(cas === undefined ? {} : { metadata_cas: cas }) };
      const sent = await this.#session.send('POST', this.apiPath('metadata', path), operation, path, body);
      if (sent.answer.status >= 200 && sent.answer.status < 300) {
        const metadataVersion = cas !== undefined && this.#metadataCas === true ? cas + 1 : undefined;
        return { metadata: { metadataVersion, customMetadata } };
      }
      if (sent.answer.status !== 400 || !METADATA_CAS_MISMATCH.test(JSON.stringify(sent.answer.body ?? ''))) {
        throw this.#session.client.httpError(sent.call, sent.answer);
      }
      lost = sent;
    }
    // Every round lost against another writer: report it as the conflict it is.
    throw this.#session.client.error(
      'KR_BACKEND_CONFLICT',
      lost?.call ?? { method: 'POST', apiPath: this.apiPath('metadata', path), operation, target: path },
      400,
      undefined,
      'custom_metadata kept changing under other writers',
    );
  }

  /**
   * True once a metadata read showed that the server checks custom_metadata writes (OpenBao's
   * `metadata_cas`): a change of one key then never undoes another writer's change, lock or not.
   * False on HashiCorp Vault, and until the first metadata read that found an entry.
   */
  get checksMetadataWrites(): boolean {
    return this.#metadataCas === true;
  }

  /** A known state may stand in for a read only where the server will check the write against it. */
  #canCheckAndSet(known: KnownMetadata): boolean {
    return (
      this.#metadataCas === true &&
      (known.metadata === undefined || known.metadata.metadataVersion !== undefined)
    );
  }

  /** The token's capabilities on each API path (as returned by apiPath). */
  async capabilities(
    apiPaths: string[],
    operation: BackendOperation,
    target: string,
  ): Promise<Record<string, string[]>> {
    const { call, answer } = await this.#session.send('POST', 'sys/capabilities-self', operation, target, {
      paths: apiPaths,
    });
    if (answer.status !== 200) throw this.#session.client.httpError(call, answer);
    const { data } = this.#session.client.parse(call, answer, CapabilitiesResponse);
    const result: Record<string, string[]> = {};
    for (const apiPath of apiPaths) {
      const caps = data[apiPath];
      result[apiPath] = Array.isArray(caps) ? caps.filter((c): c is string => typeof c === 'string') : [];
    }
    return result;
  }

  /** Renews or replaces the token now unless it stays valid for `minValidityMs` (before a roll). */
  async ensureFreshToken(minValidityMs: number): Promise<void> {
    await this.#session.tokens.ensureFresh(minValidityMs, 'preflight', 'token');
  }

  async lookupSelf(operation: BackendOperation, target: string): Promise<TokenLookup> {
    const { call, answer } = await this.#session.send('GET', 'auth/token/lookup-self', operation, target);
    if (answer.status !== 200) throw this.#session.client.httpError(call, answer);
    const { data } = this.#session.client.parse(call, answer, TokenLookupResponse);
    const lookup = { ttl: data.ttl, policies: data.policies ?? [] };
    if (call.token !== undefined) this.#session.tokens.rememberLookup(call.token, lookup);
    return lookup;
  }

  /**
   * What lookup-self says about the current token, asked once per token: a new login, a re-read
   * static token or a renewal asks again. Each preflight still proves the token works for its
   * path, through its own capabilities-self call.
   */
  async tokenLookup(operation: BackendOperation, target: string): Promise<TokenLookup> {
    const known = this.#session.tokens.lookupOf(await this.#session.tokens.token(operation, target));
    return known ?? (await this.lookupSelf(operation, target));
  }
}

function changesAnything(current: Record<string, string>, changes: Record<string, string | null>): boolean {
  return Object.entries(changes).some(([key, value]) =>
    value === null ? key in current : current[key] !== value,
  );
}

function applyPatch(
  current: Record<string, string>,
  changes: Record<string, string | null>,
): Record<string, string> {
  const merged: Record<string, string | null> = { ...current, ...changes };
  return Object.fromEntries(
    Object.entries(merged).filter((entry): entry is [string, string] => entry[1] !== null),
  );
}

/** Encodes each segment of a KV path; refuses empty, `.` and `..` segments (handled by the caller). */
export function encodePath(path: string): string {
  return path.split('/').map(encodeURIComponent).join('/');
}

/** True when `path` is a usable KV path: relative, no empty, `.` or `..` segments. */
export function isValidKvPath(path: string): boolean {
  if (path === '' || path.includes('\0')) return false;
  return path.split('/').every((segment) => segment !== '' && segment !== '.' && segment !== '..');
}
