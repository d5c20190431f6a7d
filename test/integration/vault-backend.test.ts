// The Vault backend against a real OpenBao dev server: the shared contract, then what only Vault
// has (check-and-set, custom_metadata, errors, namespaces, TLS). Auth methods: vault-auth.test.ts.
import { createServer } from 'node:http';
import { describe, expect, it } from 'vitest';
import { BackendError } from '../../src/backends/errors.ts';
import type { StoreTarget, ValueShape } from '../../src/backends/types.ts';
import { createTestClock, describeBackendContract, makeRecord } from '../backends/contract.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { vaultServer } from './servers.ts';
import { makeVaultBackend as makeBackend, uniqueName, vaultAdmin } from './vault-admin.ts';

const RAW: ValueShape = { format: 'raw', secretField: 'apiKey', fields: [] };
const server = vaultServer();

if (server === undefined) {
  describe.skip('vault backend (OpenBao not available; see the global setup message)', () => {
    it('needs OpenBao', () => undefined);
  });
} else {
  const vault = server;
  const admin = vaultAdmin(vault);
  const run = uniqueName('run');
  let n = 0;
  const target = (prefix = 'apps', shape: Partial<ValueShape> = {}): StoreTarget => {
    n += 1;
    return { path: `${prefix}/${run}/key-${String(n)}`, shape: { ...RAW, ...shape } };
  };

  describeBackendContract('vault (OpenBao)', () => {
    const clock = createTestClock();
    return Promise.resolve({
      backend: makeBackend(vault, { clock }),
      clock,
      otherRunner: () => Promise.resolve(makeBackend(vault, { clock })),
      newTarget: (shape?: Partial<ValueShape>) => target('contract', shape),
      cleanup: () => Promise.resolve(),
    });
  });

  describe('vault backend: check-and-set', () => {
    it('refuses to overwrite a version written by someone else after the lock was taken', async () => {
      const backend = makeBackend(vault);
      const t = target();
      await backend.writeSecret(t, makeRecord());
      const lock = await backend.acquireLock(t, { owner: 'a', rotationId: 'r', ttlMs: 60_000 });
      expect(lock.acquired).toBe(true);
      await admin.must('POST', `secret/data/${t.path}`, {
        data: { apiKey: 'sk_written_behind_our_back_0001' },
      });
      const error: unknown = await backend.writeSecret(t, makeRecord()).catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'KR_BACKEND_CONFLICT', operation: 'write', retryable: false });
      expect((await admin.readData(t.path)).data).toEqual({ apiKey: 'sk_written_behind_our_back_0001' });
      await backend.close();
    });

    it('answers alreadyApplied when an earlier attempt landed but its answer was lost', async () => {
      const t = target();
      const record = makeRecord();
      const retrying = makeBackend(vault);
      await retrying.preflight(t);
      // Another process (or the lost first attempt) wrote exactly this record meanwhile.
      const other = makeBackend(vault);
      const first = await other.writeSecret(t, record);
      const retry = await retrying.writeSecret(t, record);
      expect(retry).toEqual({ version: first.version, alreadyApplied: true });
      expect((await admin.readData(t.path)).version).toBe(Number(first.version));
      await Promise.all([retrying.close(), other.close()]);
    });

    it('stores a raw shape as a one-field map and a json shape as its fields', async () => {
      const backend = makeBackend(vault);
      const raw = target();
      const json = target('apps', { format: 'json', secretField: 'token', fields: ['keyId', 'rotationId'] });
      const record = makeRecord({ keyId: 'key_42' });
      await backend.writeSecret(raw, record);
      await backend.writeSecret(json, record);
      expect((await admin.readData(raw.path)).data).toEqual({ apiKey: record.secret.reveal() });
      expect((await admin.readData(json.path)).data).toEqual({
        token: record.secret.reveal(),
        keyId: 'key_42',
        rotationId: record.rotationId,
      });
      await backend.close();
    });
  });

  describe('vault backend: custom_metadata', () => {
    it("keeps an operator's own custom_metadata keys through keyroll's bookkeeping", async () => {
      const backend = makeBackend(vault);
      const t = target();
      const record = makeRecord();
      const written = await backend.writeSecret(t, record);
      await admin.must('POST', `secret/metadata/${t.path}`, {
        custom_metadata: { team: 'billing', keyroll_intent: '{}' },
      });
      await backend.setIntent(t, {
        rotationId: 'r1',
        keyId: 'k',
        owner: 'o',
        startedAt: '2030-01-01T00:00:00.000Z',
      });
      await backend.recordRotation(t, {
        rotationId: record.rotationId,
        rotatedAt: record.rotatedAt,
        version: written.version,
      });
      await backend.clearIntent(t, 'r1');
      const meta = (await admin.must('GET', `secret/metadata/${t.path}`)).data as {
        custom_metadata: Record<string, string>;
      };
      expect(meta.custom_metadata.team).toBe('billing');
      expect(meta.custom_metadata.keyroll_last_rotation_id).toBe(record.rotationId);
      expect(meta.custom_metadata.keyroll_intent).toBeUndefined();
      await backend.close();
    });

    it('names the rotation that wrote a raw value, read from custom_metadata', async () => {
      const backend = makeBackend(vault);
      const t = target();
      const record = makeRecord();
      await backend.writeSecret(t, record);
      expect((await backend.readSecret(t))?.rotationId).toBe(record.rotationId);
      await backend.close();
    });
  });

  describe('vault backend: the previous version and slot bookkeeping (invariant 10)', () => {
    const writeTwice = async (t: StoreTarget): Promise<void> => {
      await admin.must('POST', `secret/data/${t.path}`, {
        data: { apiKey: 'sk_standby_slot_value_00000001' },
      });
      await admin.must('POST', `secret/data/${t.path}`, {
        data: { apiKey: 'sk_active_slot_value_000000002' },
      });
    };

    it('reads the version before the current one', async () => {
      const backend = makeBackend(vault);
      const t = target();
      await writeTwice(t);
      const previous = await backend.readPrevious(t);
      expect(previous?.secret.reveal()).toBe('sk_standby_slot_value_00000001');
      expect(previous?.version).toBe('1');
      await backend.close();
    });

    it.each([
      ['deleted', (path: string) => admin.must('POST', `secret/delete/${path}`, { versions: [1] })],
      ['destroyed', (path: string) => admin.must('PUT', `secret/destroy/${path}`, { versions: [1] })],
      [
        'dropped by max_versions',
        async (path: string) => {
          await admin.must('POST', `secret/metadata/${path}`, { max_versions: 1 });
          return admin.must('POST', `secret/data/${path}`, {
            data: { apiKey: 'sk_third_value_000000000003' },
          });
        },
      ],
    ])('answers undefined when the previous version was %s', async (_how, remove) => {
      const backend = makeBackend(vault);
      const t = target();
      await writeTwice(t);
      await remove(t.path);
      expect(await backend.readPrevious(t)).toBeUndefined();
      expect(await backend.readSecret(t)).toBeDefined();
      await backend.close();
    });

    it("keeps the active slot beside the last rotation keys, with an operator's own keys, and reads metadata of older keyrolls", async () => {
      const backend = makeBackend(vault);
      const t = target();
      await admin.must('POST', `secret/data/${t.path}`, { data: { apiKey: 'sk_existing_value_000000009' } });
      // An older keyroll's bookkeeping (no key id, no probe) and a probe record this keyroll cannot read.
      await admin.must('POST', `secret/metadata/${t.path}`, {
        custom_metadata: {
          team: 'billing',
          keyroll_last_rotation_id: 'rot-old',
          keyroll_last_rotated_at: '2029-12-01T00:00:00.000Z',
          keyroll_last_probe: '{not json',
        },
      });
      const before = await backend.readState(t);
      expect(before).toMatchObject({ lastRotationId: 'rot-old' });
      expect(before.lastKeyId).toBeUndefined();
      expect(before.lastProbe).toBeUndefined();
      await backend.recordRotation(t, {
        rotationId: 'rot-new',
        rotatedAt: '2030-01-02T00:00:00.000Z',
        version: '1',
        keyId: 'key_slot_a',
      });
      await backend.recordProbe(t, { at: '2030-01-02T01:00:00.000Z', result: 'works' });
      expect(await admin.customMetadata(t.path)).toMatchObject({
        team: 'billing',
        keyroll_last_rotation_id: 'rot-new',
        keyroll_last_key_id: 'key_slot_a',
      });
      expect(await backend.readState(t)).toMatchObject({
        lastKeyId: 'key_slot_a',
        lastProbe: { at: '2030-01-02T01:00:00.000Z', result: 'works' },
      });
      // A later rotation recorded without a key id: lastKeyId names the last rotation's key only.
      await backend.recordRotation(t, {
        rotationId: 'rot-single',
        rotatedAt: '2030-01-03T00:00:00.000Z',
        version: '1',
      });
      expect(await admin.customMetadata(t.path)).not.toHaveProperty('keyroll_last_key_id');
      await backend.close();
    });
  });

  describe('vault backend: errors', () => {
    it('is unavailable and retryable when nothing listens at the address', async () => {
      const closed = await closedPort();
      const backend = makeBackend(vault, { address: `http://127.0.0.1:${String(closed)}` });
      await expect(backend.readState(target())).rejects.toMatchObject({
        code: 'KR_BACKEND_UNAVAILABLE',
        retryable: true,
        kind: 'vault',
      });
      await backend.close();
    });

    it('is denied for an invalid token, without the token or secret in the error', async () => {
      const backend = makeBackend(vault, { token: 'hvs.not-a-real-token-000000' });
      const record = makeRecord();
      const error: unknown = await backend.writeSecret(target(), record).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(BackendError);
      expect(error).toMatchObject({ code: 'KR_BACKEND_DENIED', status: 403, retryable: false });
      const text = `${String(error)} ${JSON.stringify((error as BackendError).toFields())}`;
      expectNoSecrets([text], [record.secret.reveal()]);
      expectNoSecrets([text], ['hvs.not-a-real-token-000000']);
      await backend.close();
    });

    it('refuses a path with empty or dot segments before any request', async () => {
      const backend = makeBackend(vault);
      for (const path of ['', 'a//b', 'a/../b', 'a/key.keyroll-lock']) {
        await expect(backend.preflight({ path, shape: RAW })).rejects.toMatchObject({
          code: 'KR_BACKEND_INVALID_TARGET',
        });
      }
      await backend.close();
    });
  });

  describe('vault backend: namespace', () => {
    it('writes inside the configured namespace (X-Vault-Namespace)', async () => {
      const namespace = uniqueName('team');
      await admin.must('POST', `sys/namespaces/${namespace}`, {});
      await admin.must(
        'POST',
        'sys/mounts/secret',
        { type: 'kv', options: { version: '2' } },
        { 'x-vault-namespace': namespace },
      );
      const backend = makeBackend(vault, { namespace });
      const t = target();
      const record = makeRecord();
      await backend.preflight(t);
      await backend.writeSecret(t, record);
      expect((await admin.readData(t.path, { 'x-vault-namespace': namespace })).data).toEqual({
        apiKey: record.secret.reveal(),
      });
      expect((await admin.readData(t.path)).status).toBe(404);
      await backend.close();
    });
  });

  describe('vault backend: TLS', () => {
    it('trusts the server certificate through caFile', async ({ skip }) => {
      if (vault.binDir === null) skip('an external OpenBao was given; no bao binary to start a TLS server');
      const { startTlsOpenBao } = await import('./vault-tls.ts');
      const tls = await startTlsOpenBao(vault.binDir ?? '');
      try {
        const trusting = makeBackend(vault, {
          address: tls.address,
          token: tls.rootToken,
          caFile: tls.caFile,
        });
        const t = target();
        await trusting.writeSecret(t, makeRecord());
        expect((await trusting.readState(t)).exists).toBe(true);
        await trusting.close();
        const untrusting = makeBackend(vault, { address: tls.address, token: tls.rootToken });
        await expect(untrusting.readState(t)).rejects.toMatchObject({ code: 'KR_BACKEND_UNAVAILABLE' });
        await untrusting.close();
      } finally {
        await tls.stop();
      }
    });
  });
}

async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as { port: number }).port;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}
