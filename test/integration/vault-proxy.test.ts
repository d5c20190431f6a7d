// The Vault backend seen from the wire, through a loopback proxy in front of the real OpenBao that
// records every request in arrival order and can hold one, drop its answer after forwarding it
// (the write landed, the answer is lost) or answer in OpenBao's place. What it shows:
// - invariant 2: between the roll answer and the data write, no request at all, even when the
//   token is past 2/3 of its TTL (ensureFresh renews it before the roll instead);
// - a lock is never left behind by an acquisition that throws;
// - bookkeeping recorded without the key lock keeps the lock holder's intent marker.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { VaultBackendConfig } from '../../src/backends/vault/config.ts';
import { VaultBackend } from '../../src/backends/vault/backend.ts';
import type { StoreTarget } from '../../src/backends/types.ts';
import { createTestClock, makeRecord, type TestClock } from '../backends/contract.ts';
import { vaultServer, type VaultServer } from './servers.ts';
import { uniqueName, vaultAdmin } from './vault-admin.ts';

/** What the proxy does with a request: forward it (the default), or one of the faults. */
type Fault =
  | { kind: 'drop-answer' }
  | { kind: 'answer'; status: number; body: unknown }
  | { kind: 'hold'; until: Promise<void>; arrived: () => void };

interface RecordingProxy {
  address: string;
  /** `METHOD /v1/path` of every request, in arrival order (query strings dropped). */
  requests: string[];
  /** Arms a fault for the next request whose `METHOD /v1/path` equals `request` (after `skip` such requests pass). */
  once(request: string, fault: Fault, skip?: number): void;
  close(): Promise<void>;
}

async function startProxy(upstream: string): Promise<RecordingProxy> {
  const requests: string[] = [];
  const armed: { request: string; fault: Fault; skip: number }[] = [];
  const server: Server = createServer((req, res) => {
    void (async () => {
      const line = `${req.method ?? ''} ${(req.url ?? '').split('?')[0] ?? ''}`;
      requests.push(line);
      const index = armed.findIndex((a) => a.request === line);
      const match = armed[index];
      let fault: Fault | undefined;
      if (match !== undefined && match.skip > 0) match.skip -= 1;
      else if (match !== undefined) fault = armed.splice(index, 1)[0]?.fault;
      if (fault?.kind === 'answer') {
        res.writeHead(fault.status, { 'content-type': 'application/json' }).end(JSON.stringify(fault.body));
        return;
      }
      if (fault?.kind === 'hold') {
        fault.arrived();
        await fault.until;
      }
      const answer = await forward(upstream, req);
      if (fault?.kind === 'drop-answer') {
        // Applied upstream, the answer never arrives: the client sees its connection close.
        res.socket?.destroy();
        return;
      }
      res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body);
    })().catch(() => res.socket?.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    address: `http://127.0.0.1:${String((server.address() as { port: number }).port)}`,
    requests,
    once: (request, fault, skip = 0) => armed.push({ request, fault, skip }),
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

async function forward(upstream: string, req: IncomingMessage): Promise<{ status: number; body: string }> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const headers: Record<string, string> = {};
  for (const name of ['x-vault-token', 'x-vault-request', 'x-vault-namespace', 'content-type']) {
    const value = req.headers[name];
    if (typeof value === 'string') headers[name] = value;
  }
  const method = (req.method ?? 'GET') as 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
  const answer = await request(`${upstream}${req.url ?? '/'}`, {
    method,
    headers,
    ...(chunks.length === 0 ? {} : { body: Buffer.concat(chunks) }),
  });
  return { status: answer.statusCode, body: await answer.body.text() };
}

/** A gate the test opens by hand, and a promise that the held request has arrived. */
function gate(): { fault: Fault; arrived: Promise<void>; open: () => void } {
  let open = (): void => undefined;
  let arrive = (): void => undefined;
  const until = new Promise<void>((resolve) => (open = resolve));
  const arrived = new Promise<void>((resolve) => (arrive = resolve));
  return {
    fault: { kind: 'hold', until, arrived: arrive },
    arrived,
    open: () => {
      open();
    },
  };
}

const server = vaultServer();

function backendVia(address: string, token: string, clock?: TestClock): VaultBackend {
  const config = VaultBackendConfig.parse({
    kind: 'vault',
    address,
    timeoutMs: 10_000,
    auth: { method: 'token', token: 'env:KR_PROXY_TEST_TOKEN' },
  });
  return new VaultBackend('vault-proxy', config, {
    env: { KR_PROXY_TEST_TOKEN: token },
    ...(clock === undefined ? {} : { now: clock.now }),
  });
}

describe.skipIf(server === undefined)('vault backend through a recording proxy', () => {
  const vault = server as VaultServer;
  const admin = vaultAdmin(vault);
  const policy = uniqueName('keyroll-proxy');
  let proxy: RecordingProxy;
  const target = (): StoreTarget => ({
    path: `proxy/${uniqueName('key')}`,
    shape: { format: 'raw', secretField: 'apiKey', fields: [] },
  });
  const dataWrite = (t: StoreTarget): string => `POST /v1/secret/data/${t.path}`;
  /** The requests from `mark` up to and including the first data write of `t`. */
  const untilDataWrite = (mark: number, t: StoreTarget): string[] => {
    const after = proxy.requests.slice(mark);
    return after.slice(0, after.indexOf(dataWrite(t)) + 1);
  };
  const token = async (ttl: string, extra: Record<string, unknown> = {}): Promise<string> => {
    const body = await admin.must('POST', 'auth/token/create', {
      policies: [policy],
      ttl,
      renewable: true,
      ...extra,
    });
    return (body.auth as { client_token: string }).client_token;
  };

  beforeAll(async () => {
    await admin.putPolicy(policy, 'path "*" { capabilities = ["create", "read", "update", "list"] }');
    proxy = await startProxy(vault.address);
  });
  afterAll(async () => {
    await proxy.close();
  });

  /** A backend on a fresh token of that TTL, through the proxy, with preflight, lock and intent done as the engine runs them before a roll. */
  async function prepared(
    ttl: string,
    extra: Record<string, unknown> = {},
  ): Promise<{ clock: TestClock; backend: VaultBackend; t: StoreTarget }> {
    const clock = createTestClock();
    const backend = backendVia(proxy.address, await token(ttl, extra), clock);
    const t = target();
    await backend.preflight(t);
    expect(
      (await backend.acquireLock(t, { owner: 'proxy-test', rotationId: 'r', ttlMs: 600_000 })).acquired,
    ).toBe(true);
    await backend.setIntent(t, {
      rotationId: 'r',
      keyId: 'k',
      owner: 'proxy-test',
      startedAt: '2030-01-01T00:00:00.000Z',
    });
    return { clock, backend, t };
  }

  describe('the write after the roll (invariant 2)', () => {
    it('is the first request after the roll answer, even with the token past 2/3 of its TTL', async () => {
      const { clock, backend, t } = await prepared('300s');
      clock.advance(210_000); // renewal was due at 200 s; the token itself lives until 300 s
      const rollAnswered = proxy.requests.length;
      await backend.writeSecret(t, makeRecord());
      expect(untilDataWrite(rollAnswered, t)).toEqual([dataWrite(t)]);
      await backend.close();
    });

    it('gets its renewal from ensureFresh, before the roll', async () => {
      const { clock, backend, t } = await prepared('300s');
      clock.advance(210_000);
      const beforeRoll = proxy.requests.length;
      await backend.ensureFresh(60_000);
      expect(proxy.requests.slice(beforeRoll)).toEqual(['POST /v1/auth/token/renew-self']);
      const rollAnswered = proxy.requests.length;
      await backend.writeSecret(t, makeRecord());
      expect(untilDataWrite(rollAnswered, t)).toEqual([dataWrite(t)]);
      // Renewed for a full TTL: ordinary calls do not renew again for another 200 s.
      clock.advance(150_000);
      const later = proxy.requests.length;
      await backend.readState(t);
      expect(proxy.requests.slice(later)).not.toContain('POST /v1/auth/token/renew-self');
      await backend.close();
    });

    it('renews in ensureFresh a token that would expire within the time asked for, though not yet due', async () => {
      const { clock, backend } = await prepared('300s');
      clock.advance(100_000); // 200 s left, renewal not due before 200 s
      const beforeRoll = proxy.requests.length;
      await backend.ensureFresh(250_000);
      expect(proxy.requests.slice(beforeRoll)).toEqual(['POST /v1/auth/token/renew-self']);
      await backend.close();
    });

    it('does nothing in ensureFresh for a token that stays valid long enough', async () => {
      const { clock, backend } = await prepared('300s');
      clock.advance(60_000);
      const beforeRoll = proxy.requests.length;
      await backend.ensureFresh(60_000);
      expect(proxy.requests.slice(beforeRoll)).toEqual([]);
      await backend.close();
    });

    it('refuses in ensureFresh, before any roll, a token that cannot be renewed for that long', async () => {
      const { backend } = await prepared('60s', { explicit_max_ttl: '90s' });
      const error: unknown = await backend.ensureFresh(600_000).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'KR_BACKEND_DENIED', kind: 'vault', retryable: false });
      expect((error as Error).message).toMatch(/expires in \d+s, sooner than the 600s/);
      await backend.close();
    });

    it('renews first only when the token has already expired: the one way the write can go out', async () => {
      const { clock, backend, t } = await prepared('300s');
      clock.advance(301_000); // expired by the backend's clock (OpenBao's token still lives)
      const rollAnswered = proxy.requests.length;
      await backend.writeSecret(t, makeRecord());
      expect(untilDataWrite(rollAnswered, t)).toEqual(['POST /v1/auth/token/renew-self', dataWrite(t)]);
      await backend.close();
    });
  });

  describe('no lock left behind', () => {
    const request = (owner: string) => ({ owner, rotationId: `rot-${owner}`, ttlMs: 900_000 });

    it('returns a lock whose write landed but whose answer was lost as acquired', async () => {
      const backend = backendVia(proxy.address, vault.rootToken);
      const t = target();
      proxy.once(`POST /v1/secret/data/${t.path}.keyroll-lock`, { kind: 'drop-answer' });
      const outcome = await backend.acquireLock(t, request('a'));
      expect(outcome).toMatchObject({ acquired: true, lock: { owner: 'a', rotationId: 'rot-a' } });
      if (!outcome.acquired) return;
      await backend.releaseLock(t, outcome.lock);
      expect((await backend.acquireLock(t, request('b'))).acquired).toBe(true);
      await backend.close();
    });

    it('gives the lock to a retried acquire when the write landed and the read-back failed too', async () => {
      const backend = backendVia(proxy.address, vault.rootToken);
      const t = target();
      proxy.once(`POST /v1/secret/data/${t.path}.keyroll-lock`, { kind: 'drop-answer' });
      // The first read of the entry (before the write) passes; the read-back after it fails.
      proxy.once(
        `GET /v1/secret/data/${t.path}.keyroll-lock`,
        { kind: 'answer', status: 503, body: { errors: ['Vault is sealed'] } },
        1,
      );
      await expect(backend.acquireLock(t, request('a'))).rejects.toMatchObject({
        code: 'KR_BACKEND_UNAVAILABLE',
        operation: 'lock',
      });
      // The on-call retries at once with the same owner and rotation: not busy.
      expect(await backend.acquireLock(t, request('a'))).toMatchObject({
        acquired: true,
        lock: { owner: 'a' },
      });
      await backend.close();
    });

    it('releases the lock when the version read after taking it fails', async () => {
      const backend = backendVia(proxy.address, vault.rootToken);
      const t = target();
      await admin.must('POST', `secret/data/${t.path}`, { data: { apiKey: 'sk_existing_value_000000001' } });
      proxy.once(`GET /v1/secret/metadata/${t.path}`, {
        kind: 'answer',
        status: 503,
        body: { errors: ['Vault is sealed'] },
      });
      await expect(backend.acquireLock(t, request('a'))).rejects.toMatchObject({
        code: 'KR_BACKEND_UNAVAILABLE',
        operation: 'lock',
      });
      expect((await backend.readState(t)).lock).toBeUndefined();
      // The on-call's immediate retry, as another runner, is not told the key is busy.
      expect((await backendVia(vault.address, vault.rootToken).acquireLock(t, request('b'))).acquired).toBe(
        true,
      );
      await backend.close();
    });
  });

  describe('bookkeeping without the lock', () => {
    it("keeps the lock holder's intent written between its metadata read and its write", async () => {
      const holder = backendVia(vault.address, vault.rootToken);
      const bystander = backendVia(proxy.address, vault.rootToken);
      const t = target();
      await admin.must('POST', `secret/data/${t.path}`, { data: { apiKey: 'sk_existing_value_000000002' } });
      await admin.must('POST', `secret/metadata/${t.path}`, { custom_metadata: { team: 'billing' } });
      const held = gate();
      proxy.once(`POST /v1/secret/metadata/${t.path}`, held.fault);
      const failure = {
        rotationId: 'rot-failed',
        step: 'preflight',
        errorCode: 'KR_BACKEND_UNAVAILABLE',
        at: '2030-01-01T00:00:00.000Z',
      };
      const recording = bystander.recordFailure(t, failure);
      await held.arrived; // the bystander has read the metadata and sent its write
      await holder.setIntent(t, {
        rotationId: 'rot-holder',
        keyId: 'k',
        owner: 'holder',
        startedAt: '2030-01-01T00:00:00.000Z',
      });
      held.open();
      await recording;
      const state = await holder.readState(t);
      expect(state).toMatchObject({ intent: { rotationId: 'rot-holder' }, lastFailure: failure });
      expect((await admin.customMetadata(t.path)).team).toBe('billing');
      await Promise.all([holder.close(), bystander.close()]);
    });

    it('writes nothing when the change is already there', async () => {
      const backend = backendVia(proxy.address, vault.rootToken);
      const t = target();
      await backend.setIntent(t, {
        rotationId: 'r1',
        keyId: 'k',
        owner: 'o',
        startedAt: '2030-01-01T00:00:00.000Z',
      });
      const mark = proxy.requests.length;
      await backend.clearIntent(t, 'other-rotation');
      expect(proxy.requests.slice(mark)).not.toContain(`POST /v1/secret/metadata/${t.path}`);
      await backend.close();
    });
  });
});
