// Root-token operations the Vault/OpenBao integration tests use to prepare the server (policies,
// tokens, auth mounts, namespaces) and to look behind the backend's back. Plain fetch on
// purpose: the code under test must not be the tool that checks it.
import { randomBytes } from 'node:crypto';
import diagnosticsChannel from 'node:diagnostics_channel';
import { VaultBackendConfig } from '../../src/backends/vault/config.ts';
import { VaultBackend } from '../../src/backends/vault/backend.ts';
import type { TestClock } from '../backends/contract.ts';
import type { VaultServer } from './servers.ts';

export interface VaultAdmin {
  call(
    method: string,
    apiPath: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: unknown }>;
  /** Like call, but throws unless 2xx; returns the JSON body. */
  must(
    method: string,
    apiPath: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<Record<string, unknown>>;
  putPolicy(name: string, hcl: string): Promise<void>;
  createToken(options: {
    policies: string[];
    ttl?: string;
    renewable?: boolean;
    noDefaultPolicy?: boolean;
  }): Promise<string>;
  readData(
    path: string,
    headers?: Record<string, string>,
  ): Promise<{ status: number; data?: Record<string, unknown>; version?: number }>;
  /** The secret's custom_metadata as the server holds it (empty when it has none). */
  customMetadata(path: string): Promise<Record<string, string>>;
}

/** The requests a recorder has seen, as `METHOD /v1/path` (query left off), in order. */
export interface RequestRecorder {
  seen: string[];
  stop(): void;
}

/**
 * Records every undici request (this process) whose path, query left off, contains one of
 * `parts`, as it is published on `channel`: 'undici:request:create' when it is made,
 * 'undici:request:headers' once its answer (status and headers) has arrived.
 */
export function recordRequests(
  channel: 'undici:request:create' | 'undici:request:headers',
  ...parts: string[]
): RequestRecorder {
  const seen: string[] = [];
  const onMessage = (message: unknown): void => {
    const { request } = message as { request: { method: string; path: string } };
    const path = request.path.split('?')[0] ?? '';
    if (parts.some((part) => path.includes(part))) seen.push(`${request.method} ${path}`);
  };
  diagnosticsChannel.subscribe(channel, onMessage);
  return { seen, stop: () => diagnosticsChannel.unsubscribe(channel, onMessage) };
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

export function vaultAdmin(server: VaultServer): VaultAdmin {
  const call: VaultAdmin['call'] = async (method, apiPath, body, headers = {}) => {
    const response = await fetch(`${server.address}/v1/${apiPath}`, {
      method,
      headers: {
        'x-vault-token': server.rootToken,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        ...headers,
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    return { status: response.status, body: text === '' ? undefined : (JSON.parse(text) as unknown) };
  };
  const must: VaultAdmin['must'] = async (method, apiPath, body, headers) => {
    const answer = await call(method, apiPath, body, headers);
    if (answer.status < 200 || answer.status >= 300) {
      throw new Error(
        `vault admin ${method} ${apiPath}: HTTP ${String(answer.status)} ${JSON.stringify(answer.body)}`,
      );
    }
    return (answer.body ?? {}) as Record<string, unknown>;
  };
  return {
    call,
    must,
    putPolicy: async (name, hcl) => {
      await must('PUT', `sys/policies/acl/${name}`, { policy: hcl });
    },
    createToken: async ({ policies, ttl, renewable, noDefaultPolicy }) => {
      const body = await must('POST', 'auth/token/create', {
        policies,
        ...(ttl === undefined ? {} : { ttl }),
        ...(renewable === undefined ? {} : { renewable }),
        ...(noDefaultPolicy === true ? { no_default_policy: true } : {}),
      });
      return (body.auth as { client_token: string }).client_token;
    },
    readData: async (path, headers) => {
      const answer = await call('GET', `secret/data/${path}`, undefined, headers);
      if (answer.status !== 200) return { status: answer.status };
      const data = (answer.body as { data: { data: Record<string, unknown>; metadata: { version: number } } })
        .data;
      return { status: 200, data: data.data, version: data.metadata.version };
    },
    customMetadata: async (path) => {
      const body = await must('GET', `secret/metadata/${path}`);
      return (body.data as { custom_metadata: Record<string, string> | null }).custom_metadata ?? {};
    },
  };
}

/** A Vault backend under test; the token (root by default) is passed as an env: reference. */
export interface VaultBackendOptions {
  token?: string;
  auth?: Record<string, unknown>;
  env?: NodeJS.ProcessEnv;
  namespace?: string;
  clock?: TestClock;
  address?: string;
  caFile?: string;
}

export function makeVaultBackend(vault: VaultServer, options: VaultBackendOptions = {}): VaultBackend {
  const config = VaultBackendConfig.parse({
    kind: 'vault',
    address: options.address ?? vault.address,
    timeoutMs: 10_000,
    auth: options.auth ?? { method: 'token', token: 'env:KR_TEST_VAULT_TOKEN' },
    ...(options.namespace === undefined ? {} : { namespace: options.namespace }),
    ...(options.caFile === undefined ? {} : { caFile: options.caFile }),
  });
  return new VaultBackend('vault-test', config, {
    env: { KR_TEST_VAULT_TOKEN: options.token ?? vault.rootToken, ...options.env },
    ...(options.clock === undefined ? {} : { now: options.clock.now }),
  });
}
