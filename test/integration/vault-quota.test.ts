// Vault/OpenBao rate-limit quotas (sys/quotas/rate-limit) against a real OpenBao: a 429 is waited
// out and counted, not a failure (invariant 11), until the call's budget (quotas.maxWaitMs) is
// spent. Each test gets a KV v2 mount of its own with a quota on it, so no other test is slowed.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackendError } from '../../src/backends/errors.ts';
import type { StoreTarget } from '../../src/backends/types.ts';
import { VaultBackendConfig } from '../../src/backends/vault/config.ts';
import { VaultBackend } from '../../src/backends/vault/backend.ts';
import { sleep } from '../../src/rotation/backoff.ts';
import { makeRecord } from '../backends/contract.ts';
import { DEMO_KEYS, JSON_SHAPE, keyPolicy, startBench } from '../rotation/harness.ts';
import { vaultServer, type VaultServer } from './servers.ts';
import { uniqueName, vaultAdmin } from './vault-admin.ts';

const server = vaultServer();
const raw = (path: string): StoreTarget => ({
  path,
  shape: { format: 'raw', secretField: 'apiKey', fields: [] },
});

describe.skipIf(server === undefined)('vault rate-limit quotas (OpenBao)', () => {
  const vault = server as VaultServer;
  const admin = vaultAdmin(vault);
  const mounts: string[] = [];

  /** A KV v2 mount with a rate-limit quota of `rate` requests per second on it. */
  async function quotaMount(rate: number, extra: Record<string, unknown> = {}): Promise<string> {
    const mount = uniqueName('quota');
    await admin.must('POST', `sys/mounts/${mount}`, { type: 'kv', options: { version: '2' } });
    await admin.must('POST', `sys/quotas/rate-limit/${mount}`, {
      path: `${mount}/`,
      rate,
      interval: '1s',
      ...extra,
    });
    mounts.push(mount);
    return mount;
  }

  function backendOn(mount: string, throttled: string[], quotas?: { maxWaitMs: number }): VaultBackend {
    const config = VaultBackendConfig.parse({
      kind: 'vault',
      address: vault.address,
      mount,
      timeoutMs: 10_000,
      auth: { method: 'token', token: 'env:KR_TEST_VAULT_TOKEN' },
      ...(quotas ? { quotas } : {}),
    });
    return new VaultBackend('vault-quota', config, {
      env: { KR_TEST_VAULT_TOKEN: vault.rootToken },
      quota: {
        observer: {
          throttled: (event) =>
            throttled.push(`${event.group} ${event.operation}${event.afterRoll ? ' after the roll' : ''}`),
        },
      },
    });
  }

  beforeAll(async () => {
    // Retry-After on every 429 (OpenBao sends whole seconds: 0 within the last second).
    await admin.must('POST', 'sys/quotas/config', { enable_rate_limit_response_headers: true });
  });
  afterAll(async () => {
    for (const mount of mounts) {
      await admin.call('DELETE', `sys/quotas/rate-limit/${mount}`);
      await admin.call('DELETE', `sys/mounts/${mount}`);
    }
  });

  it("waits out the quota's 429s: every read of a burst over the rate succeeds, and each 429 is counted", async () => {
    const mount = await quotaMount(2);
    const throttled: string[] = [];
    const backend = backendOn(mount, throttled);
    try {
      const results = await Promise.all(
        Array.from({ length: 8 }, () => backend.readSecret(raw('apps/never-written'))),
      );
      expect(results).toEqual(Array.from({ length: 8 }, () => undefined));
      expect(throttled.length).toBeGreaterThan(0);
      expect(new Set(throttled)).toEqual(new Set(['request read']));
    } finally {
      await backend.close();
    }
  });

  it('fails with a retryable KR_BACKEND_THROTTLED only once the call has waited its budget', async () => {
    // A client over the rate is blocked for a minute: every call in that minute is refused.
    const mount = await quotaMount(1, { block_interval: '60s' });
    const throttled: string[] = [];
    const backend = backendOn(mount, throttled, { maxWaitMs: 1_000 });
    try {
      await backend.readSecret(raw('apps/first')).catch(() => undefined);
      const errors = await Promise.all(
        [1, 2, 3].map(() => backend.readSecret(raw('apps/blocked')).catch((e: unknown) => e)),
      );
      const error = errors.find((e) => e instanceof BackendError);
      expect(error).toMatchObject({
        code: 'KR_BACKEND_THROTTLED',
        retryable: true,
        status: 429,
        operation: 'read',
      });
      // The blocked client's Retry-After (the block) is longer than the budget: refused at once, counted.
      expect(throttled.length).toBeGreaterThan(0);
    } finally {
      await backend.close();
    }
  });

  it("hands a 429 on the rotation's write straight back (the store step retries it), counted as after the roll", async () => {
    const mount = await quotaMount(1, { block_interval: '60s' });
    const throttled: string[] = [];
    const impatient = backendOn(mount, [], { maxWaitMs: 1_000 });
    const backend = backendOn(mount, throttled, { maxWaitMs: 60_000 });
    try {
      // Over the rate: this client is blocked for a minute.
      await Promise.all(
        [1, 2, 3].map(() => impatient.readSecret(raw('apps/blocking')).catch(() => undefined)),
      );
      const error: unknown = await backend
        .writeSecret(raw('apps/written'), makeRecord())
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ code: 'KR_BACKEND_THROTTLED', retryable: true, operation: 'write' });
      expect(throttled).toEqual(['request write after the roll']);
    } finally {
      await impatient.close();
      await backend.close();
    }
  });

  it('rotates keys into a mount with a rate-limit quota: every 429 is waited out, no key fails', async () => {
    const mount = await quotaMount(3);
    const bench = await startBench({
      keys: (org) =>
        DEMO_KEYS.map((id) =>
          keyPolicy(id, org(id), {
            destinations: [{ backend: 'quota', target: { path: `apps/${id}`, shape: JSON_SHAPE } }],
            // The store's own retries (a 429 on the write after the roll is theirs) with real waits.
            store: { attempts: 5, initialBackoffMs: 300, maxBackoffMs: 2_000 },
            lockTtlMs: 300_000,
          }),
        ),
      policy: {
        backends: {
          quota: VaultBackendConfig.parse({
            kind: 'vault',
            address: vault.address,
            mount,
            timeoutMs: 10_000,
            auth: { method: 'token', token: 'env:KR_TEST_VAULT_TOKEN' },
          }),
        },
      },
    });
    const throttled: string[] = [];
    try {
      const summary = await bench.run({
        trigger: { force: true, reason: 'leak' },
        concurrency: 3,
        runtime: {
          env: { KR_TEST_VAULT_TOKEN: vault.rootToken },
          sleep,
          observer: {
            stepDuration: () => undefined,
            exposure: () => undefined,
            throttled: (event) => throttled.push(event.operation),
          },
        },
      });
      expect(summary).toMatchObject({ rotated: 3, failed: 0 });
      expect(throttled.length).toBeGreaterThan(0);
    } finally {
      await bench.close();
    }
  });
});
