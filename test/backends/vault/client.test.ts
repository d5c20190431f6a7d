// The Vault client and token source against a loopback stand-in for Vault, for the answers a
// real OpenBao does not give on demand: 5xx, garbage bodies, silence, capped renewals; and one
// backend sequence the engine does not make (a metadata change between the lock and readState).
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { Secret } from '../../../src/audit/secret.ts';
import { BackendError } from '../../../src/backends/errors.ts';
import type { StoreTarget } from '../../../src/backends/types.ts';
import { VaultTokenSource } from '../../../src/backends/vault/auth.ts';
import { VaultBackend } from '../../../src/backends/vault/backend.ts';
import { MAX_VAULT_ANSWER_BYTES, VaultClient } from '../../../src/backends/vault/client.ts';
import { KvV2, VaultSession } from '../../../src/backends/vault/kv.ts';
import { startReceiver, type Receiver } from '../../support/alert-receiver.ts';
import { createTestClock } from '../contract.ts';
import { expectNoSecrets } from '../../support/secret-scan.ts';

interface Seen {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}
type Reply = { status: number; body?: unknown; raw?: string } | 'hang';

let server: Server;
let address: string;
let seen: Seen[];
let reply: (request: Seen) => Reply;

beforeEach(async () => {
  seen = [];
  reply = () => ({ status: 200, body: {} });
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const request: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
      seen.push(request);
      const answer = reply(request);
      if (answer === 'hang') return;
      res.statusCode = answer.status;
      res.setHeader('content-type', 'application/json');
      res.end(answer.raw ?? (answer.body === undefined ? '' : JSON.stringify(answer.body)));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  address = `http://127.0.0.1:${String((server.address() as { port: number }).port)}`;
});
afterEach(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

function client(options: { namespace?: string; timeoutMs?: number } = {}): VaultClient {
  return new VaultClient({
    backend: 'vault-unit',
    address,
    timeoutMs: options.timeoutMs ?? 5_000,
    ...(options.namespace ? { namespace: options.namespace } : {}),
  });
}

// A schema the client tests parse with (an object with a data map).
const KvProbe = z.object({ data: z.object({ data: z.record(z.string(), z.unknown()) }) });

const call = { method: 'GET', apiPath: 'secret/data/app', operation: 'read', target: 'app' } as const;

describe('vault client', () => {
  it('sends the token, namespace and request headers', async () => {
    const c = client({ namespace: 'team-a' });
    await c.send({ ...call, token: new Secret('hvs.unit-test-token-0001') });
    expect(seen[0]?.headers).toMatchObject({
      'x-vault-token': 'hvs.unit-test-token-0001',
      'x-vault-namespace': 'team-a',
      'x-vault-request': 'true',
    });
    await c.close();
  });

  it('reports a 5xx as a retryable unavailable backend with its status', async () => {
    reply = () => ({ status: 503, body: { errors: ['Vault is sealed'] } });
    const c = client();
    const error = await c.json(call, KvProbe).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'KR_BACKEND_UNAVAILABLE', status: 503, retryable: true });
    expect((error as Error).message).toContain('Vault is sealed');
    await c.close();
  });

  it('reports a body that is not JSON as an invalid response, without quoting it and without cause', async () => {
    const secret = 'sk_live_echoed_in_garbage_0001';
    reply = () => ({ status: 200, raw: `{"data": ${secret}` });
    const c = client();
    const error = await c.send(call).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(BackendError);
    expect(error).toMatchObject({ code: 'KR_BACKEND_INVALID_RESPONSE' });
    expect((error as Error).cause).toBeUndefined();
    expectNoSecrets([(error as Error).message], [secret]);
    await c.close();
  });

  it('reports an answer of the wrong shape as an invalid response', async () => {
    reply = () => ({ status: 200, body: { data: { data: 'not a map', metadata: {} } } });
    const c = client();
    await expect(c.json(call, KvProbe)).rejects.toMatchObject({
      code: 'KR_BACKEND_INVALID_RESPONSE',
      status: 200,
    });
    await c.close();
  });

  it('blanks a known secret that a Vault error text echoes', async () => {
    const secret = new Secret('sk_live_echoed_in_error_00002');
    reply = () => ({ status: 400, body: { errors: [`invalid value ${secret.reveal()}`] } });
    const c = client();
    const error = await c.json(call, KvProbe).catch((e: unknown) => e);
    expectNoSecrets([(error as Error).message], [secret.reveal()]);
    expect((error as Error).message).toContain('[REDACTED]');
    await c.close();
  });

  it('times out a server that never answers', async () => {
    reply = () => 'hang';
    const c = client({ timeoutMs: 200 });
    await expect(c.send(call)).rejects.toMatchObject({ code: 'KR_BACKEND_TIMEOUT', retryable: true });
    await c.close();
  });

  it('names a missing CA file as the problem', async () => {
    const c = new VaultClient({
      backend: 'vault-unit',
      address,
      timeoutMs: 1000,
      caFile: '/nonexistent/ca.pem',
    });
    await expect(c.send(call)).rejects.toMatchObject({
      code: 'KR_BACKEND_FAILED',
      message: expect.stringContaining('/nonexistent/ca.pem') as unknown,
    });
    await c.close();
  });
});

describe('vault client: answers are read up to a cap', () => {
  const MiB = 1024 * 1024;
  let hostile: Receiver;
  beforeEach(async () => {
    hostile = await startReceiver();
  });
  afterEach(async () => {
    await hostile.close();
  });
  const hostileClient = (): VaultClient =>
    new VaultClient({ backend: 'vault-unit', address: hostile.url, timeoutMs: 10_000 });

  it('stops reading a 64 MiB error answer early and reports the status alone', async () => {
    hostile.answer({ status: 500, streamBytes: 64 * MiB });
    const c = hostileClient();
    await expect(c.json(call, KvProbe)).rejects.toMatchObject({
      code: 'KR_BACKEND_UNAVAILABLE',
      status: 500,
    });
    await c.close();
    await hostile.hostileAnswersDone();
    // What the client read plus what the loopback socket buffers held when it closed.
    expect(hostile.bodyBytesSent).toBeLessThan(16 * MiB);
  });

  it('refuses a 2xx answer past the cap as an invalid response, without reading it all', async () => {
    hostile.answer({ status: 200, streamBytes: 64 * MiB });
    const c = hostileClient();
    await expect(c.send(call)).rejects.toMatchObject({
      code: 'KR_BACKEND_INVALID_RESPONSE',
      status: 200,
      message: expect.stringContaining(`larger than ${String(MAX_VAULT_ANSWER_BYTES)} bytes`) as unknown,
    });
    await c.close();
    await hostile.hostileAnswersDone();
    expect(hostile.bodyBytesSent).toBeLessThan(16 * MiB);
  });
});

describe('vault token source', () => {
  const loginAnswer = (token: string, ttl: number): Reply => ({
    status: 200,
    body: { auth: { client_token: token, lease_duration: ttl, renewable: true } },
  });
  const approle = {
    method: 'approle',
    roleId: 'role-1',
    secretId: 'env:SECRET_ID',
    mount: 'approle',
  } as const;

  function source(c: VaultClient, clock = createTestClock()): VaultTokenSource {
    return new VaultTokenSource({
      client: c,
      auth: approle,
      backend: 'vault-unit',
      now: clock.now,
      env: { SECRET_ID: 'secret-id-0001' },
    });
  }

  it('shares one login between concurrent callers', async () => {
    let logins = 0;
    reply = (r) =>
      r.url.endsWith('/login') ? (logins++, loginAnswer('hvs.one', 3600)) : { status: 200, body: {} };
    const tokens = source(client());
    const got = await Promise.all([
      tokens.token('read', 'a'),
      tokens.token('read', 'b'),
      tokens.token('read', 'c'),
    ]);
    expect(logins).toBe(1);
    expect(got.map((t) => t.reveal())).toEqual(['hvs.one', 'hvs.one', 'hvs.one']);
  });

  it('sends role_id and secret_id to the approle mount', async () => {
    reply = () => loginAnswer('hvs.one', 3600);
    await source(client()).token('read', 'a');
    expect(seen[0]).toMatchObject({ method: 'POST', url: '/v1/auth/approle/login' });
    expect(JSON.parse(seen[0]?.body ?? '{}')).toEqual({ role_id: 'role-1', secret_id: 'secret-id-0001' });
  });

  it('logs in again when a renewal is capped far below the TTL (max TTL reached)', async () => {
    const clock = createTestClock();
    let logins = 0;
    reply = (r) => {
      if (r.url.endsWith('/login')) return loginAnswer(`hvs.login-${String(++logins)}`, 60);
      if (r.url.endsWith('/renew-self')) return loginAnswer('hvs.login-1', 5);
      return { status: 200, body: {} };
    };
    const tokens = source(client(), clock);
    expect((await tokens.token('read', 'a')).reveal()).toBe('hvs.login-1');
    clock.advance(41_000);
    expect((await tokens.token('read', 'a')).reveal()).toBe('hvs.login-2');
    expect(seen.map((s) => s.url)).toEqual([
      '/v1/auth/approle/login',
      '/v1/auth/token/renew-self',
      '/v1/auth/approle/login',
    ]);
  });

  it('logs in again when the renewal is refused', async () => {
    const clock = createTestClock();
    let logins = 0;
    reply = (r) => {
      if (r.url.endsWith('/login')) return loginAnswer(`hvs.login-${String(++logins)}`, 60);
      return { status: 403, body: { errors: ['permission denied'] } };
    };
    const tokens = source(client(), clock);
    await tokens.token('read', 'a');
    clock.advance(41_000);
    expect((await tokens.token('read', 'a')).reveal()).toBe('hvs.login-2');
  });

  it('does not swallow an unavailable server during renewal', async () => {
    const clock = createTestClock();
    reply = (r) =>
      r.url.endsWith('/login') ? loginAnswer('hvs.one', 60) : { status: 503, body: { errors: ['sealed'] } };
    const tokens = source(client(), clock);
    await tokens.token('read', 'a');
    clock.advance(41_000);
    await expect(tokens.token('read', 'a')).rejects.toMatchObject({ code: 'KR_BACKEND_UNAVAILABLE' });
  });

  it('keeps an until-expiry token past 2/3 of its TTL, and replaces it once it has expired', async () => {
    const clock = createTestClock();
    let logins = 0;
    reply = (r) =>
      r.url.endsWith('/login')
        ? loginAnswer(`hvs.login-${String(++logins)}`, 60)
        : loginAnswer('hvs.login-1', 60);
    const tokens = source(client(), clock);
    await tokens.token('read', 'a');
    clock.advance(41_000); // renewal due at 40 s
    expect((await tokens.token('write', 'a', 'until-expiry')).reveal()).toBe('hvs.login-1');
    expect(seen.map((r) => r.url)).toEqual(['/v1/auth/approle/login']);
    clock.advance(20_000); // expired at 60 s
    await tokens.token('write', 'a', 'until-expiry');
    expect(seen.map((r) => r.url)).toEqual(['/v1/auth/approle/login', '/v1/auth/token/renew-self']);
  });

  it('logs in again in ensureFresh when a renewal cannot reach the validity asked for', async () => {
    const clock = createTestClock();
    let logins = 0;
    reply = (r) => {
      if (r.url.endsWith('/login')) return loginAnswer(`hvs.login-${String(++logins)}`, 600);
      return loginAnswer('hvs.login-1', 250); // capped near its max TTL, still above 1/3
    };
    const tokens = source(client(), clock);
    await tokens.token('read', 'a');
    clock.advance(450_000);
    await tokens.ensureFresh(300_000, 'preflight', 'token');
    expect(seen.map((r) => r.url)).toEqual([
      '/v1/auth/approle/login',
      '/v1/auth/token/renew-self',
      '/v1/auth/approle/login',
    ]);
    expect((await tokens.token('write', 'a', 'until-expiry')).reveal()).toBe('hvs.login-2');
  });

  it('refuses in ensureFresh when not even a fresh login lives long enough, without the token in the error', async () => {
    reply = () => loginAnswer('hvs.short-lived-token-0001', 120);
    const tokens = source(client());
    const error: unknown = await tokens.ensureFresh(600_000, 'preflight', 'token').catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'KR_BACKEND_DENIED', operation: 'preflight' });
    expectNoSecrets([(error as Error).message], ['hvs.short-lived-token-0001']);
  });

  it('retries a request once with a fresh login after a 403', async () => {
    let logins = 0;
    reply = (r) => {
      if (r.url.endsWith('/login')) return loginAnswer(`hvs.login-${String(++logins)}`, 3600);
      if (r.headers['x-vault-token'] === 'hvs.login-1')
        return { status: 403, body: { errors: ['permission denied'] } };
      return { status: 200, body: { data: { ttl: 100, policies: ['keyroll'] } } };
    };
    const c = client();
    const kv = new KvV2(new VaultSession(c, source(c)), 'secret');
    await expect(kv.lookupSelf('preflight', 'a')).resolves.toEqual({ ttl: 100, policies: ['keyroll'] });
    expect(logins).toBe(2);
  });
});

describe('vault backend', () => {
  it('reads the state afresh when the metadata changed after the lock was taken', async () => {
    // A minimal KV v2: the lock entry and the secret's custom_metadata, one version each.
    let lock: unknown;
    let custom: Record<string, string> | undefined;
    reply = (r) => {
      if (r.url === '/v1/auth/token/lookup-self')
        return { status: 200, body: { data: { ttl: 0, policies: [] } } };
      if (r.url === '/v1/secret/data/app.keyroll-lock') {
        if (r.method === 'POST') lock = (JSON.parse(r.body) as { data: unknown }).data;
        if (lock === undefined) return { status: 404, body: { errors: [] } };
        return {
          status: 200,
          body: { data: r.method === 'POST' ? { version: 1 } : { data: lock, metadata: { version: 1 } } },
        };
      }
      if (r.url === '/v1/secret/metadata/app') {
        if (r.method === 'POST')
          custom = (JSON.parse(r.body) as { custom_metadata: Record<string, string> }).custom_metadata;
        if (custom === undefined) return { status: 404, body: { errors: [] } };
        return r.method === 'POST'
          ? { status: 204 }
          : { status: 200, body: { data: { current_version: 0, custom_metadata: custom } } };
      }
      return { status: 500, body: { errors: [`unexpected ${r.method} ${r.url}`] } };
    };
    const backend = new VaultBackend(
      'vault-unit',
      {
        kind: 'vault',
        address,
        mount: 'secret',
        timeoutMs: 5_000,
        auth: { method: 'token', token: 'env:T' },
      },
      { env: { T: 'hvs.unit-test-token-0001' } },
    );
    const target: StoreTarget = { path: 'app', shape: { format: 'raw', secretField: 'apiKey', fields: [] } };
    const locked = await backend.acquireLock(target, { owner: 'runner-a', rotationId: 'r1', ttlMs: 60_000 });
    expect(locked.acquired).toBe(true);
    const failure = { rotationId: 'r1', step: 'roll', errorCode: 'KR_TEST', at: '2024-01-01T00:00:00.000Z' };
    await backend.recordFailure(target, failure);
    await expect(backend.readState(target)).resolves.toMatchObject({
      lastFailure: failure,
      lock: { owner: 'runner-a', rotationId: 'r1' },
    });
    await backend.close();
  });
});
