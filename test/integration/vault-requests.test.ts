// What a rotation costs in Vault requests, against a real OpenBao: the request counts behind the
// shell-loop benchmark (bench/requests.ts), and the safety of each request that was removed. Each
// saving rests on something this process knows (its token, its lock, what it last read or wrote
// under that lock); these tests show the saving, and that the knowledge is dropped, and the
// server asked again, whenever it may be wrong.
import diagnosticsChannel from 'node:diagnostics_channel';
import { afterEach, describe, expect, it } from 'vitest';
import type { StoreTarget } from '../../src/backends/types.ts';
import { createTestClock } from '../backends/contract.ts';
import { vaultServer, type VaultServer } from './servers.ts';
import { makeVaultBackend, uniqueName, vaultAdmin } from './vault-admin.ts';

const server = vaultServer();

interface Recorder {
  /** `METHOD /v1/path` of every request whose path contains one of the parts, in order. */
  seen: string[];
  stop(): void;
}

let active: Recorder | undefined;
afterEach(() => {
  active?.stop();
  active = undefined;
});

/** Records every undici request (this process) to a path containing one of `parts`. */
function record(...parts: string[]): Recorder {
  const seen: string[] = [];
  const onCreate = (message: unknown): void => {
    const { request } = message as { request: { method: string; path: string } };
    const path = request.path.split('?')[0] ?? '';
    if (parts.some((part) => path.includes(part))) seen.push(`${request.method} ${path}`);
  };
  diagnosticsChannel.subscribe('undici:request:create', onCreate);
  active = { seen, stop: () => diagnosticsChannel.unsubscribe('undici:request:create', onCreate) };
  return active;
}

const raw = (path: string): StoreTarget => ({ path, shape: { format: 'raw', secretField: 'apiKey', fields: [] } });

describe.skipIf(server === undefined)('vault requests: the token', () => {
  const vault = server as VaultServer;
  const admin = vaultAdmin(vault);

  it('is looked up once, not at every preflight: capabilities-self proves it works for each path', async () => {
    const backend = makeVaultBackend(vault);
    const requests = record('/v1/auth/token/', '/v1/sys/capabilities-self');
    const first = await backend.preflight(raw(`requests/${uniqueName('a')}`));
    await backend.preflight(raw(`requests/${uniqueName('b')}`));
    expect(requests.seen).toEqual(['GET /v1/auth/token/lookup-self', 'POST /v1/sys/capabilities-self', 'POST /v1/sys/capabilities-self']);
    expect(first.checks[0]).toMatch(/^token valid \(policies: root; ttl none\)$/);
    await backend.close();
  });

  it('is looked up again once renewed', async () => {
    const policy = uniqueName('keyroll-requests');
    await admin.putPolicy(policy, 'path "*" { capabilities = ["create", "read", "update"] }');
    const clock = createTestClock();
    const backend = makeVaultBackend(vault, { token: await admin.createToken({ policies: [policy], ttl: '300s', renewable: true }), clock });
    const requests = record('/v1/auth/token/');
    await backend.preflight(raw(`requests/${uniqueName('a')}`));
    clock.advance(210_000); // past 2/3 of the TTL: the next call renews first
    const renewed = await backend.preflight(raw(`requests/${uniqueName('b')}`));
    expect(requests.seen).toEqual(['GET /v1/auth/token/lookup-self', 'POST /v1/auth/token/renew-self', 'GET /v1/auth/token/lookup-self']);
    expect(renewed.checks[0]).toContain(`policies: default, ${policy}`);
    await backend.close();
  });

  it('still fails the next preflight once revoked, though its lookup is remembered', async () => {
    const token = await admin.createToken({ policies: ['default'], ttl: '1h' });
    const backend = makeVaultBackend(vault, { token });
    // `default` may not write anywhere, so preflight fails on capabilities, after the lookup.
    await expect(backend.preflight(raw(`requests/${uniqueName('a')}`))).rejects.toMatchObject({ code: 'KR_BACKEND_DENIED' });
    await admin.must('POST', 'auth/token/revoke', { token });
    const error: unknown = await backend.preflight(raw(`requests/${uniqueName('b')}`)).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'KR_BACKEND_DENIED', status: 403, operation: 'preflight' });
    await backend.close();
  });
});
