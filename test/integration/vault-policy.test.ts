// The Vault policy that ships in config/vault-policy.hcl, applied to a real OpenBao: a token with
// that policy alone (no `default` policy) runs every backend operation of a full rotation, and a
// token missing part of it is refused at preflight (invariant 1: no roll without a writable destination).
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { VaultBackendConfig } from '../../src/backends/vault/config.ts';
import { VaultBackend } from '../../src/backends/vault/backend.ts';
import type { StoreTarget } from '../../src/backends/types.ts';
import { createTestClock, makeRecord } from '../backends/contract.ts';
import { vaultServer, type VaultServer } from './servers.ts';
import { uniqueName, vaultAdmin } from './vault-admin.ts';

const POLICY_FILE = new URL('../../config/vault-policy.hcl', import.meta.url);
const server = vaultServer();

function backendWithToken(vault: VaultServer, token: string, now?: () => Date): VaultBackend {
  const config = VaultBackendConfig.parse({
    kind: 'vault',
    address: vault.address,
    auth: { method: 'token', token: 'env:KR_POLICY_TOKEN' },
  });
  return new VaultBackend('vault-policy', config, {
    env: { KR_POLICY_TOKEN: token },
    ...(now === undefined ? {} : { now }),
  });
}

if (server === undefined) {
  describe.skip('vault policy (OpenBao not available; see the global setup message)', () => {
    it('needs OpenBao', () => undefined);
  });
} else {
  const vault = server;
  const admin = vaultAdmin(vault);

  describe('config/vault-policy.hcl', () => {
    it('is sufficient for a full rotation: preflight, lock, intent, write, read-back, record, release', async () => {
      const policy = uniqueName('keyroll');
      await admin.putPolicy(policy, await readFile(POLICY_FILE, 'utf8'));
      const token = await admin.createToken({
        policies: [policy],
        noDefaultPolicy: true,
        ttl: '1h',
        renewable: true,
      });
      const backend = backendWithToken(vault, token);
      const target: StoreTarget = {
        path: `apps/${uniqueName('billing')}/api-key`,
        shape: { format: 'json', secretField: 'apiKey', fields: ['keyId', 'rotationId'] },
      };
      const record = makeRecord();

      expect((await backend.preflight(target)).exists).toBe(false);
      const lock = await backend.acquireLock(target, {
        owner: 'policy-test',
        rotationId: record.rotationId,
        ttlMs: 60_000,
      });
      if (!lock.acquired) throw new Error('expected the lock');
      await backend.setIntent(target, {
        rotationId: record.rotationId,
        keyId: record.keyId,
        owner: 'policy-test',
        startedAt: record.rotatedAt,
      });
      const written = await backend.writeSecret(target, record);
      expect((await backend.readSecret(target))?.secret.digest()).toBe(record.secret.digest());
      await backend.clearIntent(target, record.rotationId);
      await backend.recordRotation(target, {
        rotationId: record.rotationId,
        rotatedAt: record.rotatedAt,
        version: written.version,
      });
      await backend.releaseLock(target, lock.lock);
      expect(await backend.readState(target)).toMatchObject({
        exists: true,
        lastRotationId: record.rotationId,
      });
      expect(await backend.readState(target)).not.toHaveProperty('lock');

      // A second rotation of the now existing secret (update rather than create).
      expect((await backend.preflight(target)).exists).toBe(true);
      const next = makeRecord();
      expect((await backend.writeSecret(target, next)).alreadyApplied).toBe(false);
      await backend.close();
    });

    it('lets the token renew itself without the default policy', async () => {
      const policy = uniqueName('keyroll');
      await admin.putPolicy(policy, await readFile(POLICY_FILE, 'utf8'));
      const token = await admin.createToken({
        policies: [policy],
        noDefaultPolicy: true,
        ttl: '300s',
        renewable: true,
      });
      const clock = createTestClock();
      const backend = backendWithToken(vault, token, clock.now);
      const target: StoreTarget = {
        path: `apps/${uniqueName('renew')}/api-key`,
        shape: { format: 'raw', secretField: 'apiKey', fields: [] },
      };
      await backend.readState(target);
      clock.advance(210_000);
      await backend.readState(target);
      const lookup = await admin.must('POST', 'auth/token/lookup', { token });
      expect((lookup.data as { last_renewal_time?: number }).last_renewal_time).toBeDefined();
      await backend.close();
    });

    it('does not reach paths outside its prefix', async () => {
      const policy = uniqueName('keyroll');
      await admin.putPolicy(policy, await readFile(POLICY_FILE, 'utf8'));
      const token = await admin.createToken({ policies: [policy], noDefaultPolicy: true });
      const backend = backendWithToken(vault, token);
      await expect(
        backend.preflight({
          path: `other/${uniqueName('x')}`,
          shape: { format: 'raw', secretField: 'apiKey', fields: [] },
        }),
      ).rejects.toMatchObject({
        code: 'KR_BACKEND_DENIED',
        operation: 'preflight',
      });
      await backend.close();
    });

    it('refuses at preflight a token that may read but not write, and writes nothing', async () => {
      const policy = uniqueName('keyroll-readonly');
      await admin.putPolicy(
        policy,
        'path "secret/data/apps/*" { capabilities = ["read"] }\npath "secret/metadata/apps/*" { capabilities = ["read"] }\npath "sys/capabilities-self" { capabilities = ["update"] }',
      );
      const token = await admin.createToken({ policies: [policy] });
      const backend = backendWithToken(vault, token);
      const path = `apps/${uniqueName('narrow')}/api-key`;
      const error: unknown = await backend
        .preflight({ path, shape: { format: 'raw', secretField: 'apiKey', fields: [] } })
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'KR_BACKEND_DENIED', operation: 'preflight', retryable: false });
      expect((error as Error).message).toContain(`create on secret/data/${path}`);
      expect((await admin.readData(path)).status).toBe(404);
      await backend.close();
    });

    it('refuses at preflight a token without the metadata capability keyroll keeps its bookkeeping in', async () => {
      const policy = uniqueName('keyroll-nometa');
      await admin.putPolicy(
        policy,
        'path "secret/data/apps/*" { capabilities = ["create", "read", "update"] }\npath "sys/capabilities-self" { capabilities = ["update"] }',
      );
      const token = await admin.createToken({ policies: [policy] });
      const backend = backendWithToken(vault, token);
      await expect(
        backend.preflight({
          path: `apps/${uniqueName('nometa')}/k`,
          shape: { format: 'raw', secretField: 'apiKey', fields: [] },
        }),
      ).rejects.toMatchObject({
        code: 'KR_BACKEND_DENIED',
      });
      await backend.close();
    });
  });
}
