// The Vault write after the roll is one request (the exposure window, benchmarked in
// bench/exposure.ts): writeSecret resolves once the data write is answered. In a rotation the
// intent marker, written before the roll, already names the version the write creates, so nothing
// follows it; a write without such a marker is followed by the bookkeeping that names the rotation
// (a custom_metadata read and write), without holding it up. Every later call on the path waits
// for that bookkeeping, so readers still see it.
import { describe, expect, it } from 'vitest';
import type { StoreTarget } from '../../src/backends/types.ts';
import { makeRecord } from '../backends/contract.ts';
import { vaultServer } from './servers.ts';
import { makeVaultBackend, recordRequests, uniqueName, vaultAdmin } from './vault-admin.ts';

const server = vaultServer();

describe.skipIf(server === undefined)('vault backend: the write after the roll', () => {
  it('resolves after the one data write; readSecret then waits for the bookkeeping and names the rotation', async () => {
    const vault = server!;
    const backend = makeVaultBackend(vault);
    const target: StoreTarget = {
      path: `window/${uniqueName('w')}`,
      shape: { format: 'raw', secretField: 'apiKey', fields: [] },
    };
    await backend.preflight(target);
    const record = makeRecord();
    const requests = recordRequests('undici:request:headers', target.path);
    try {
      await backend.writeSecret(target, record);
      expect(requests.seen).toEqual([`POST /v1/secret/data/${target.path}`]);

      expect((await backend.readSecret(target))?.rotationId).toBe(record.rotationId);
      expect(requests.seen).toEqual([
        `POST /v1/secret/data/${target.path}`,
        `GET /v1/secret/metadata/${target.path}`,
        `POST /v1/secret/metadata/${target.path}`,
        `GET /v1/secret/data/${target.path}`,
      ]);
    } finally {
      requests.stop();
      await backend.close();
    }
  });

  it('in a rotation (lock, intent marker) is the only request until the verify read, which names the rotation', async () => {
    const vault = server!;
    const backend = makeVaultBackend(vault);
    const target: StoreTarget = {
      path: `window/${uniqueName('r')}`,
      shape: { format: 'raw', secretField: 'apiKey', fields: [] },
    };
    const record = makeRecord();
    await backend.preflight(target);
    expect(
      (
        await backend.acquireLock(target, {
          owner: 'window-test',
          rotationId: record.rotationId,
          ttlMs: 60_000,
        })
      ).acquired,
    ).toBe(true);
    await backend.setIntent(target, {
      rotationId: record.rotationId,
      keyId: record.keyId,
      owner: 'window-test',
      startedAt: record.rotatedAt,
    });
    const requests = recordRequests('undici:request:headers', target.path);
    try {
      await backend.writeSecret(target, record);
      expect((await backend.readSecret(target))?.rotationId).toBe(record.rotationId);
      expect(requests.seen).toEqual([
        `POST /v1/secret/data/${target.path}`,
        `GET /v1/secret/data/${target.path}`,
      ]);
    } finally {
      requests.stop();
      await backend.close();
    }
  });

  it('close() waits for the bookkeeping of the last write', async () => {
    const vault = server!;
    const backend = makeVaultBackend(vault);
    const target: StoreTarget = {
      path: `window/${uniqueName('c')}`,
      shape: { format: 'raw', secretField: 'apiKey', fields: [] },
    };
    await backend.preflight(target);
    const record = makeRecord();
    await backend.writeSecret(target, record);
    await backend.close();
    expect((await vaultAdmin(vault).customMetadata(target.path)).keyroll_last_write_rotation_id).toBe(
      record.rotationId,
    );
  });
});
