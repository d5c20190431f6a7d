// KV v2 operations keyroll needs, on top of the client: read/write a path's data with
// check-and-set, read its metadata, replace its custom_metadata, and ask which capabilities the
// token has. Every call goes through `VaultSession`, which attaches a valid token.
import type { BackendOperation } from '../errors.ts';
import type { VaultAnswer, VaultCall, VaultClient, VaultMethod } from './client.ts';
import type { VaultTokenSource } from './auth.ts';
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

  async send(method: VaultMethod, apiPath: string, operation: BackendOperation, target: string, body?: unknown): Promise<{ call: VaultCall; answer: VaultAnswer }> {
    const call: VaultCall = { method, apiPath, operation, target, token: await this.tokens.token(operation, target), ...(body === undefined ? {} : { body }) };
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
  customMetadata: Record<string, string>;
  /** True when the current version exists and is neither deleted nor destroyed. */
  liveCurrentVersion: boolean;
}

const CAS_MISMATCH = /check-and-set|did not match the current version/i;

export class KvV2 {
  readonly #session: VaultSession;
  readonly #mount: string;

  constructor(session: VaultSession, mount: string) {
    this.#session = session;
    this.#mount = encodeMount(mount);
  }

  /** The API path (no /v1/) for `kind` of `path`, also the form capabilities-self expects. */
  apiPath(kind: 'data' | 'metadata', path: string): string {
    return `${this.#mount}/${kind}/${encodePath(path)}`;
  }

  /** The latest version, undefined when nothing was ever written (or all was deleted). */
  async readData(path: string, operation: BackendOperation): Promise<KvData | undefined> {
    const { call, answer } = await this.#session.send('GET', this.apiPath('data', path), operation, path);
    if (answer.status === 404) {
      // A deleted latest version answers 404 with its metadata; plain absence has no data.
      const deleted = KvReadResponse.safeParse(answer.body);
      if (!deleted.success) return undefined;
      return { data: undefined, version: deleted.data.data.metadata.version, customMetadata: deleted.data.data.metadata.custom_metadata ?? {} };
    }
    if (answer.status !== 200) throw this.#session.client.httpError(call, answer);
    const { data } = this.#session.client.parse(call, answer, KvReadResponse);
    return { data: data.data ?? undefined, version: data.metadata.version, customMetadata: data.metadata.custom_metadata ?? {} };
  }

  /** Writes a new version if the current one is still `cas` (0: only if none exists). */
  async writeData(path: string, data: Record<string, string>, cas: number, operation: BackendOperation): Promise<{ version: number } | 'cas-mismatch'> {
    const { call, answer } = await this.#session.send('POST', this.apiPath('data', path), operation, path, { options: { cas }, data });
    if (answer.status === 400 && CAS_MISMATCH.test(JSON.stringify(answer.body ?? ''))) return 'cas-mismatch';
    if (answer.status !== 200) throw this.#session.client.httpError(call, answer);
    return { version: this.#session.client.parse(call, answer, KvWriteResponse).data.version };
  }

  async readMetadata(path: string, operation: BackendOperation): Promise<KvMetadata | undefined> {
    const { call, answer } = await this.#session.send('GET', this.apiPath('metadata', path), operation, path);
    if (answer.status === 404) return undefined;
    if (answer.status !== 200) throw this.#session.client.httpError(call, answer);
    const { data } = this.#session.client.parse(call, answer, KvMetadataResponse);
    const current = data.versions?.[String(data.current_version)];
    const live = data.current_version > 0 && current !== undefined && (current.deletion_time ?? '') === '' && current.destroyed !== true;
    return { currentVersion: data.current_version, customMetadata: data.custom_metadata ?? {}, liveCurrentVersion: live };
  }

  /**
   * Changes keyroll's custom_metadata keys. Vault replaces custom_metadata as a whole on every
   * write, so this reads it first and keeps every key it does not change (an operator's own).
   */
  async updateCustomMetadata(path: string, change: (current: Record<string, string>) => Record<string, string>, operation: BackendOperation): Promise<void> {
    const current = (await this.readMetadata(path, operation))?.customMetadata ?? {};
    const next = change({ ...current });
    const { call, answer } = await this.#session.send('POST', this.apiPath('metadata', path), operation, path, { custom_metadata: next });
    if (answer.status < 200 || answer.status >= 300) throw this.#session.client.httpError(call, answer);
  }

  /** The token's capabilities on each API path (as returned by apiPath). */
  async capabilities(apiPaths: string[], operation: BackendOperation, target: string): Promise<Record<string, string[]>> {
    const { call, answer } = await this.#session.send('POST', 'sys/capabilities-self', operation, target, { paths: apiPaths });
    if (answer.status !== 200) throw this.#session.client.httpError(call, answer);
    const { data } = this.#session.client.parse(call, answer, CapabilitiesResponse);
    const result: Record<string, string[]> = {};
    for (const apiPath of apiPaths) {
      const caps = data[apiPath];
      result[apiPath] = Array.isArray(caps) ? caps.filter((c): c is string => typeof c === 'string') : [];
    }
    return result;
  }

  async lookupSelf(operation: BackendOperation, target: string): Promise<{ ttl: number; policies: string[] }> {
    const { call, answer } = await this.#session.send('GET', 'auth/token/lookup-self', operation, target);
    if (answer.status !== 200) throw this.#session.client.httpError(call, answer);
    const { data } = this.#session.client.parse(call, answer, TokenLookupResponse);
    return { ttl: data.ttl, policies: data.policies ?? [] };
  }
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
