// What a rotation costs in Vault requests, against a real OpenBao: the request counts behind the
// shell-loop benchmark (bench/requests.ts), and the safety of each request that was removed. Each
// saving rests on something this process knows (its token, its lock, what it last read or wrote
// under that lock); these tests show the saving, and that the knowledge is dropped, and the
// server asked again, whenever it may be wrong.
import diagnosticsChannel from 'node:diagnostics_channel';
import { afterEach, describe, expect, it } from 'vitest';
import type { StoreTarget } from '../../src/backends/types.ts';
import type { VaultBackend } from '../../src/backends/vault/backend.ts';
import { createTestClock, makeRecord } from '../backends/contract.ts';
import { vaultServer, type VaultServer } from './servers.ts';
import {
  makeVaultBackend,
  recordRequests,
  uniqueName,
  vaultAdmin,
  type RequestRecorder,
} from './vault-admin.ts';

const server = vaultServer();

let active: RequestRecorder | undefined;
afterEach(() => {
  active?.stop();
  active = undefined;
});

/** Records every undici request (this process) to a path containing one of `parts`; stopped after the test. */
function requestsTo(...parts: string[]): RequestRecorder {
  active = recordRequests('undici:request:create', ...parts);
  return active;
}

const raw = (path: string): StoreTarget => ({
  path,
  shape: { format: 'raw', secretField: 'apiKey', fields: [] },
});

describe.skipIf(server === undefined)('vault requests: the token', () => {
  const vault = server as VaultServer;
  const admin = vaultAdmin(vault);

  it('is looked up once, not at every preflight: capabilities-self proves it works for each path', async () => {
    const backend = makeVaultBackend(vault);
    const requests = requestsTo('/v1/auth/token/', '/v1/sys/capabilities-self');
    const first = await backend.preflight(raw(`requests/${uniqueName('a')}`));
    await backend.preflight(raw(`requests/${uniqueName('b')}`));
    expect(requests.seen).toEqual([
      'GET /v1/auth/token/lookup-self',
      'POST /v1/sys/capabilities-self',
      'POST /v1/sys/capabilities-self',
    ]);
    expect(first.checks[0]).toMatch(/^token valid \(policies: root; ttl none\)$/);
    await backend.close();
  });

  it('is looked up again once renewed', async () => {
    const policy = uniqueName('keyroll-requests');
    await admin.putPolicy(policy, 'path "*" { capabilities = ["create", "read", "update"] }');
    const clock = createTestClock();
    const backend = makeVaultBackend(vault, {
      token: await admin.createToken({ policies: [policy], ttl: '300s', renewable: true }),
      clock,
    });
    const requests = requestsTo('/v1/auth/token/');
    await backend.preflight(raw(`requests/${uniqueName('a')}`));
    clock.advance(210_000); // past 2/3 of the TTL: the next call renews first
    const renewed = await backend.preflight(raw(`requests/${uniqueName('b')}`));
    expect(requests.seen).toEqual([
      'GET /v1/auth/token/lookup-self',
      'POST /v1/auth/token/renew-self',
      'GET /v1/auth/token/lookup-self',
    ]);
    expect(renewed.checks[0]).toContain(`policies: default, ${policy}`);
    await backend.close();
  });

  it('still fails the next preflight once revoked, though its lookup is remembered', async () => {
    const token = await admin.createToken({ policies: ['default'], ttl: '1h' });
    const backend = makeVaultBackend(vault, { token });
    // `default` may not write anywhere, so preflight fails on capabilities, after the lookup.
    await expect(backend.preflight(raw(`requests/${uniqueName('a')}`))).rejects.toMatchObject({
      code: 'KR_BACKEND_DENIED',
    });
    await admin.must('POST', 'auth/token/revoke', { token });
    const error: unknown = await backend
      .preflight(raw(`requests/${uniqueName('b')}`))
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'KR_BACKEND_DENIED', status: 403, operation: 'preflight' });
    await backend.close();
  });
});

describe.skipIf(server === undefined)('vault requests: one rotation', () => {
  const vault = server as VaultServer;
  const admin = vaultAdmin(vault);
  const owner = 'requests-test';

  /** A backend that has read one existing metadata entry, so it knows the server checks-and-sets metadata. */
  async function openBaoBackend(): Promise<VaultBackend> {
    const backend = makeVaultBackend(vault);
    const seen = raw(`requests/${uniqueName('seen')}`);
    await admin.must('POST', `secret/data/${seen.path}`, { data: { apiKey: 'sk_existing_value_000000003' } });
    await backend.readState(seen);
    return backend;
  }

  /** Every request a rotation of `t` makes: its data and metadata, the capability check, the token. */
  const rotationRequests = (t: StoreTarget): RequestRecorder =>
    requestsTo(
      `/v1/secret/data/${t.path}`,
      `/v1/secret/metadata/${t.path}`,
      '/v1/sys/capabilities-self',
      '/v1/auth/token/',
    );

  /** A backend (as openBaoBackend) that has preflighted a new path, optionally given an existing value first, and holds its lock. */
  async function lockedAfterPreflight(
    name: string,
    { existing, rotationId }: { existing?: string; rotationId: string },
  ): Promise<{ backend: VaultBackend; t: StoreTarget }> {
    const backend = await openBaoBackend();
    const t = raw(`requests/${uniqueName(name)}`);
    if (existing !== undefined)
      await admin.must('POST', `secret/data/${t.path}`, { data: { apiKey: existing } });
    await backend.preflight(t);
    expect((await backend.acquireLock(t, { owner, rotationId, ttlMs: 600_000 })).acquired).toBe(true);
    return { backend, t };
  }

  /** The engine's calls for one rotation (src/rotation/rotate-key.ts), with the requests they made. */
  async function rotate(
    backend: VaultBackend,
    t: StoreTarget,
  ): Promise<{ seen: string[]; rotationId: string; version: string }> {
    // A two-slot entry's rotation (invariant 10): the slot it stored rides in the finish step's change.
    const record = makeRecord({ keyId: 'key_slot_b' });
    const requests = rotationRequests(t);
    await backend.preflight(t);
    const locked = await backend.acquireLock(t, { owner, rotationId: record.rotationId, ttlMs: 600_000 });
    if (!locked.acquired) throw new Error('expected the lock');
    expect((await backend.readState(t)).lock).toMatchObject({ owner, rotationId: record.rotationId });
    await backend.ensureFresh(300_000);
    await backend.setIntent(t, {
      rotationId: record.rotationId,
      keyId: record.keyId,
      owner,
      startedAt: record.rotatedAt,
    });
    const written = await backend.writeSecret(t, record);
    expect((await backend.readSecret(t))?.secret.equals(record.secret)).toBe(true);
    await backend.recordRotation(
      t,
      {
        rotationId: record.rotationId,
        rotatedAt: record.rotatedAt,
        version: written.version,
        keyId: record.keyId,
      },
      { clearIntent: true },
    );
    await backend.releaseLock(t, locked.lock);
    requests.stop();
    return { seen: requests.seen, rotationId: record.rotationId, version: written.version };
  }

  it('costs 9 requests for a new secret: no read that the lock, a check-and-set or the step before already answered', async () => {
    const backend = await openBaoBackend();
    const t = raw(`requests/${uniqueName('new')}`);
    const { seen, rotationId, version } = await rotate(backend, t);
    const data = `/v1/secret/data/${t.path}`;
    const metadata = `/v1/secret/metadata/${t.path}`;
    expect(seen).toEqual([
      `GET ${data}`, // preflight: readable, its version (none yet)
      'POST /v1/sys/capabilities-self', // preflight: writable
      `POST ${data}.keyroll-lock`, // lock: create-only (never written, so never locked)
      `GET ${metadata}`, // under the lock: the version to write against and the state to decide on
      `POST ${metadata}`, // intent marker, naming the version the write will create
      `POST ${data}`, // the write after the roll
      `GET ${data}`, // verify: read back
      `POST ${metadata}`, // finish: last rotation and the key it stored, which rotation wrote the version, intent cleared
      `POST ${data}.keyroll-lock`, // release, against the version the lock write created
    ]);
    const meta = await admin.customMetadata(t.path);
    expect(meta).toMatchObject({
      keyroll_last_rotation_id: rotationId,
      keyroll_last_key_id: 'key_slot_b',
      keyroll_last_write_rotation_id: rotationId,
      keyroll_last_write_version: version,
    });
    expect(meta).not.toHaveProperty('keyroll_intent');
    expect(await backend.readState(t)).not.toHaveProperty('lock');
    expect((await backend.readSecret(t))?.rotationId).toBe(rotationId);
    await backend.close();
  });

  it('costs 10 requests for an existing secret in a new process: the lock entry is read before it is written', async () => {
    const t = raw(`requests/${uniqueName('existing')}`);
    const first = makeVaultBackend(vault);
    await rotate(first, t);
    await first.close();
    const backend = makeVaultBackend(vault);
    const { seen, rotationId } = await rotate(backend, t);
    const data = `/v1/secret/data/${t.path}`;
    const metadata = `/v1/secret/metadata/${t.path}`;
    expect(seen.filter((line) => !line.includes('/auth/token/'))).toEqual([
      `GET ${data}`,
      'POST /v1/sys/capabilities-self',
      `GET ${data}.keyroll-lock`,
      `POST ${data}.keyroll-lock`,
      `GET ${metadata}`,
      `POST ${metadata}`,
      `POST ${data}`,
      `GET ${data}`,
      `POST ${metadata}`,
      `POST ${data}.keyroll-lock`,
    ]);
    expect(await backend.readState(t)).toMatchObject({ exists: true, lastRotationId: rotationId });
    await backend.close();
  });

  it('records a drift probe under its lock in one request, from the metadata it knows', async () => {
    const { backend, t } = await lockedAfterPreflight('probe', {
      existing: 'sk_existing_value_000000006',
      rotationId: 'r1',
    });
    await backend.setIntent(t, {
      rotationId: 'r1',
      keyId: 'k',
      owner,
      startedAt: '2030-01-01T00:00:00.000Z',
    });
    const requests = requestsTo(`/v1/secret/metadata/${t.path}`, `/v1/secret/data/${t.path}`);
    await backend.recordProbe(t, { at: '2030-01-01T01:00:00.000Z', result: 'dead' });
    expect(requests.seen).toEqual([`POST /v1/secret/metadata/${t.path}`]);
    const meta = await admin.customMetadata(t.path);
    expect(JSON.parse(meta.keyroll_last_probe ?? '{}')).toEqual({
      at: '2030-01-01T01:00:00.000Z',
      result: 'dead',
    });
    expect(JSON.parse(meta.keyroll_intent ?? '{}')).toMatchObject({ rotationId: 'r1' });
    await backend.close();
  });

  it('reads the previous version in two requests, the metadata and that version: the current secret is not fetched', async () => {
    const backend = makeVaultBackend(vault);
    const t = raw(`requests/${uniqueName('previous')}`);
    await admin.must('POST', `secret/data/${t.path}`, { data: { apiKey: 'sk_previous_value_0000000007' } });
    await admin.must('POST', `secret/data/${t.path}`, { data: { apiKey: 'sk_current_value_00000000008' } });
    const requests = recordRequests(
      'undici:request:create',
      `/v1/secret/data/${t.path}`,
      `/v1/secret/metadata/${t.path}`,
    );
    active = requests;
    const queries: string[] = [];
    const onCreate = (message: unknown): void => {
      const { request } = message as { request: { path: string } };
      if (request.path.includes(`/v1/secret/data/${t.path}`)) queries.push(request.path.split('?')[1] ?? '');
    };
    diagnosticsChannel.subscribe('undici:request:create', onCreate);
    try {
      expect(await backend.readPrevious(t)).toMatchObject({ version: '1' });
    } finally {
      diagnosticsChannel.unsubscribe('undici:request:create', onCreate);
    }
    expect(requests.seen).toEqual([`GET /v1/secret/metadata/${t.path}`, `GET /v1/secret/data/${t.path}`]);
    expect(queries).toEqual(['version=1']);
    await backend.close();
  });

  it('names the rotation of a version written just before a crash, from the intent marker alone', async () => {
    const record = makeRecord();
    const { backend: dying, t } = await lockedAfterPreflight('crash', { rotationId: record.rotationId });
    await dying.setIntent(t, {
      rotationId: record.rotationId,
      keyId: record.keyId,
      owner,
      startedAt: record.rotatedAt,
    });
    await dying.writeSecret(t, record);
    // Killed here: no finish step, no bookkeeping after the write. The next run reads:
    const meta = await admin.customMetadata(t.path);
    expect(meta).not.toHaveProperty('keyroll_last_write_version');
    const next = makeVaultBackend(vault);
    expect((await next.readState(t)).intent?.rotationId).toBe(record.rotationId);
    expect(await next.readSecret(t)).toMatchObject({ version: '1', rotationId: record.rotationId });
    await Promise.all([dying.close(), next.close()]);
  });

  it('does not name a rotation whose write never happened, though its marker announced the version', async () => {
    const existing = 'sk_existing_value_000000004';
    const { backend, t } = await lockedAfterPreflight('unwritten', {
      existing,
      rotationId: 'r-died-before-write',
    });
    await backend.setIntent(t, {
      rotationId: 'r-died-before-write',
      keyId: 'k',
      owner,
      startedAt: '2030-01-01T00:00:00.000Z',
    });
    // Killed after the roll, before the write: version 1 is still the old value, not the announced version 2.
    const next = makeVaultBackend(vault);
    const stored = await next.readSecret(t);
    expect(stored).not.toHaveProperty('rotationId');
    expect(stored?.version).toBe('1');
    expect(stored?.secret.reveal()).toBe(existing);
    await Promise.all([backend.close(), next.close()]);
  });

  it('keeps a metadata change made by someone else under its lock: the write based on what it knew is refused, and it reads', async () => {
    const { backend, t } = await lockedAfterPreflight('operator', {
      existing: 'sk_existing_value_000000005',
      rotationId: 'r1',
    });
    await admin.must('POST', `secret/metadata/${t.path}`, { custom_metadata: { team: 'billing' } });
    const requests = requestsTo(`/v1/secret/metadata/${t.path}`);
    await backend.setIntent(t, {
      rotationId: 'r1',
      keyId: 'k',
      owner,
      startedAt: '2030-01-01T00:00:00.000Z',
    });
    expect(requests.seen).toEqual([
      `POST /v1/secret/metadata/${t.path}`,
      `GET /v1/secret/metadata/${t.path}`,
      `POST /v1/secret/metadata/${t.path}`,
    ]);
    const meta = await admin.customMetadata(t.path);
    expect(meta.team).toBe('billing');
    expect(JSON.parse(meta.keyroll_intent ?? '{}')).toMatchObject({ rotationId: 'r1' });
    await backend.close();
  });

  it('reads the server for every readState but the one right after the lock', async () => {
    const backend = await openBaoBackend();
    const t = raw(`requests/${uniqueName('status')}`);
    expect((await backend.acquireLock(t, { owner, rotationId: 'r1', ttlMs: 600_000 })).acquired).toBe(true);
    const afterLock = requestsTo(`/v1/secret/metadata/${t.path}`, `/v1/secret/data/${t.path}`);
    expect(await backend.readState(t)).toMatchObject({ exists: false, lock: { owner, rotationId: 'r1' } });
    expect(afterLock.seen).toEqual([]);
    afterLock.stop();
    await admin.must('POST', `secret/metadata/${t.path}`, {
      custom_metadata: { keyroll_last_rotated_at: '2030-01-01T00:00:00.000Z' },
    });
    const later = requestsTo(`/v1/secret/metadata/${t.path}`, `/v1/secret/data/${t.path}`);
    expect(await backend.readState(t)).toMatchObject({
      lastRotatedAt: '2030-01-01T00:00:00.000Z',
      lock: { owner },
    });
    expect([...later.seen].sort()).toEqual([
      `GET /v1/secret/data/${t.path}.keyroll-lock`,
      `GET /v1/secret/metadata/${t.path}`,
    ]);
    await backend.close();
  });

  it('refreshes its lock against the version it wrote, without reading the entry or the metadata again', async () => {
    const backend = await openBaoBackend();
    const t = raw(`requests/${uniqueName('refresh')}`);
    expect((await backend.acquireLock(t, { owner, rotationId: 'r1', ttlMs: 600_000 })).acquired).toBe(true);
    const requests = requestsTo(`/v1/secret/metadata/${t.path}`, `/v1/secret/data/${t.path}`);
    const refreshed = await backend.acquireLock(t, { owner, rotationId: 'r1', ttlMs: 600_000 });
    expect(refreshed).toMatchObject({ acquired: true, lock: { tookOver: false } });
    expect(requests.seen).toEqual([`POST /v1/secret/data/${t.path}.keyroll-lock`]);
    await backend.close();
  });

  it('leaves alone a lock taken over from it: the release against its own version is refused, and the entry read', async () => {
    const clock = createTestClock();
    const former = makeVaultBackend(vault, { clock });
    const t = raw(`requests/${uniqueName('takeover')}`);
    const taken = await former.acquireLock(t, { owner: 'former', rotationId: 'r1', ttlMs: 1_000 });
    if (!taken.acquired) throw new Error('expected the lock');
    clock.advance(2_000);
    const successor = makeVaultBackend(vault, { clock });
    expect(
      await successor.acquireLock(t, { owner: 'successor', rotationId: 'r2', ttlMs: 600_000 }),
    ).toMatchObject({ acquired: true, lock: { tookOver: true } });
    const requests = requestsTo(`/v1/secret/data/${t.path}.keyroll-lock`);
    await former.releaseLock(t, taken.lock);
    expect(requests.seen).toEqual([
      `POST /v1/secret/data/${t.path}.keyroll-lock`,
      `GET /v1/secret/data/${t.path}.keyroll-lock`,
    ]);
    expect((await successor.readState(t)).lock).toMatchObject({ owner: 'successor' });
    await Promise.all([former.close(), successor.close()]);
  });

  it('finds a lock entry on a path never written: the create-only write is refused, the entry read, the key busy', async () => {
    const backend = makeVaultBackend(vault);
    const t = raw(`requests/${uniqueName('first')}`);
    await backend.preflight(t);
    const holder = makeVaultBackend(vault);
    const held = await holder.acquireLock(t, { owner: 'holder', rotationId: 'r-holder', ttlMs: 600_000 });
    const requests = requestsTo(`/v1/secret/data/${t.path}.keyroll-lock`);
    expect(await backend.acquireLock(t, { owner, rotationId: 'r1', ttlMs: 600_000 })).toMatchObject({
      acquired: false,
      holder: { owner: 'holder' },
    });
    expect(requests.seen).toEqual([
      `POST /v1/secret/data/${t.path}.keyroll-lock`,
      `GET /v1/secret/data/${t.path}.keyroll-lock`,
    ]);
    if (held.acquired) await holder.releaseLock(t, held.lock);
    await Promise.all([backend.close(), holder.close()]);
  });
});
