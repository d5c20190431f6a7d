// The Vault backend against a real OpenBao dev server: the shared contract, then what only Vault
// has (check-and-set, custom_metadata, auth methods and renewal, namespaces, TLS).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackendError } from '../../src/backends/errors.ts';
import { VaultBackendConfig } from '../../src/backends/vault/config.ts';
import { VaultBackend } from '../../src/backends/vault/index.ts';
import type { StoreTarget, ValueShape } from '../../src/backends/types.ts';
import { createTestClock, describeBackendContract, makeRecord, type TestClock } from '../backends/contract.ts';
import { vaultServer, type VaultServer } from './servers.ts';
import { uniqueName, vaultAdmin } from './vault-admin.ts';

const RAW: ValueShape = { format: 'raw', secretField: 'apiKey', fields: [] };
const server = vaultServer();

interface BackendOptions {
  token?: string;
  auth?: Record<string, unknown>;
  env?: NodeJS.ProcessEnv;
  namespace?: string;
  clock?: TestClock;
  address?: string;
  caFile?: string;
}

function makeBackend(vault: VaultServer, options: BackendOptions = {}): VaultBackend {
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

if (server === undefined) {
  describe.skip('vault backend (OpenBao not available; see the global setup message)', () => {
    it('needs OpenBao', () => undefined);
  });
} else {
  const vault = server;
  const admin = vaultAdmin(vault);
  const run = uniqueName('run');
  // Login methods cannot mint root tokens; tests that are not about permissions use this one.
  const ALL_POLICY = 'keyroll-test-everything';
  beforeAll(async () => {
    await admin.putPolicy(ALL_POLICY, 'path "*" { capabilities = ["create", "read", "update", "delete", "list", "sudo"] }');
  });
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
      await admin.must('POST', `secret/data/${t.path}`, { data: { apiKey: 'sk_written_behind_our_back_0001' } });
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
      expect((await admin.readData(json.path)).data).toEqual({ token: record.secret.reveal(), keyId: 'key_42', rotationId: record.rotationId });
      await backend.close();
    });
  });

  describe('vault backend: custom_metadata', () => {
    it('keeps an operator\'s own custom_metadata keys through keyroll\'s bookkeeping', async () => {
      const backend = makeBackend(vault);
      const t = target();
      const record = makeRecord();
      const written = await backend.writeSecret(t, record);
      await admin.must('POST', `secret/metadata/${t.path}`, { custom_metadata: { team: 'billing', keyroll_intent: '{}' } });
      await backend.setIntent(t, { rotationId: 'r1', keyId: 'k', owner: 'o', startedAt: '2030-01-01T00:00:00.000Z' });
      await backend.recordRotation(t, { rotationId: record.rotationId, rotatedAt: record.rotatedAt, version: written.version });
      await backend.clearIntent(t, 'r1');
      const meta = (await admin.must('GET', `secret/metadata/${t.path}`)).data as { custom_metadata: Record<string, string> };
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

  describe('vault backend: errors', () => {
    it('is unavailable and retryable when nothing listens at the address', async () => {
      const closed = await closedPort();
      const backend = makeBackend(vault, { address: `http://127.0.0.1:${String(closed)}` });
      await expect(backend.readState(target())).rejects.toMatchObject({ code: 'KR_BACKEND_UNAVAILABLE', retryable: true, kind: 'vault' });
      await backend.close();
    });

    it('is denied for an invalid token, without the token or secret in the error', async () => {
      const backend = makeBackend(vault, { token: 'hvs.not-a-real-token-000000' });
      const record = makeRecord();
      const error: unknown = await backend.writeSecret(target(), record).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(BackendError);
      expect(error).toMatchObject({ code: 'KR_BACKEND_DENIED', status: 403, retryable: false });
      const text = `${String(error)} ${JSON.stringify((error as BackendError).toFields())}`;
      expect(text).not.toContain(record.secret.reveal());
      expect(text).not.toContain('hvs.not-a-real-token-000000');
      await backend.close();
    });

    it('refuses a path with empty or dot segments before any request', async () => {
      const backend = makeBackend(vault);
      for (const path of ['', 'a//b', 'a/../b', 'a/key.keyroll-lock']) {
        await expect(backend.preflight({ path, shape: RAW })).rejects.toMatchObject({ code: 'KR_BACKEND_INVALID_TARGET' });
      }
      await backend.close();
    });
  });

  describe('vault backend: token renewal', () => {
    it('renews a renewable token at two thirds of its TTL', async () => {
      const token = await admin.createToken({ policies: [ALL_POLICY], ttl: '300s', renewable: true });
      const clock = createTestClock();
      const backend = makeBackend(vault, { token, clock });
      await backend.readState(target());
      expect(await lastRenewal(token)).toBeUndefined();
      // Renewal is due at 200 s (2/3 of 300 s) on the backend's clock.
      clock.advance(150_000);
      await backend.readState(target());
      expect(await lastRenewal(token)).toBeUndefined();
      clock.advance(60_000);
      await backend.readState(target());
      expect(await lastRenewal(token)).toBeDefined();
      await backend.close();
    });
  });

  describe('vault backend: approle', () => {
    let mount: string;
    let roleId: string;
    const secretIdEnv: NodeJS.ProcessEnv = {};

    beforeAll(async () => {
      mount = uniqueName('approle');
      await admin.must('POST', `sys/auth/${mount}`, { type: 'approle' });
      await admin.must('POST', `auth/${mount}/role/keyroll`, { token_policies: [ALL_POLICY], token_ttl: '1h' });
      roleId = ((await admin.must('GET', `auth/${mount}/role/keyroll/role-id`)).data as { role_id: string }).role_id;
      const secret = await admin.must('POST', `auth/${mount}/role/keyroll/secret-id`, {});
      secretIdEnv.KR_SECRET_ID = (secret.data as { secret_id: string }).secret_id;
    });

    it('logs in with role_id and secret_id and writes', async () => {
      const backend = makeBackend(vault, { auth: { method: 'approle', roleId, secretId: 'env:KR_SECRET_ID', mount }, env: secretIdEnv });
      const t = target();
      expect((await backend.preflight(t)).exists).toBe(false);
      const record = makeRecord();
      await backend.writeSecret(t, record);
      expect((await admin.readData(t.path)).data).toEqual({ apiKey: record.secret.reveal() });
      await backend.close();
    });

    it('is denied with a wrong secret_id', async () => {
      const backend = makeBackend(vault, { auth: { method: 'approle', roleId, secretId: 'env:KR_SECRET_ID', mount }, env: { KR_SECRET_ID: 'wrong-secret-id-0000' } });
      await expect(backend.preflight(target())).rejects.toMatchObject({ code: 'KR_BACKEND_DENIED', operation: 'preflight' });
      await backend.close();
    });

    it('logs in again when its token was revoked behind its back', async () => {
      const backend = makeBackend(vault, { auth: { method: 'approle', roleId, secretId: 'env:KR_SECRET_ID', mount }, env: secretIdEnv });
      await backend.readState(target());
      await revokeTokensOfMount(mount);
      await expect(backend.readState(target())).resolves.toMatchObject({ exists: false });
      await backend.close();
    });
  });

  describe('vault backend: kubernetes auth', () => {
    const jwt = fakeServiceAccountJwt('ops', 'keyroll');
    let tokenReview: Server;
    let dir: string;
    let mount: string;

    beforeAll(async () => {
      // A stand-in for the Kubernetes TokenReview API, which OpenBao asks whether the JWT is valid.
      tokenReview = createServer((req, res) => {
        let body = '';
        req.on('data', (chunk: Buffer) => (body += chunk.toString()));
        req.on('end', () => {
          const review = JSON.parse(body) as { spec: { token: string } };
          const ok = review.spec.token === jwt;
          res.setHeader('content-type', 'application/json');
          res.end(
            JSON.stringify({
              apiVersion: 'authentication.k8s.io/v1',
              kind: 'TokenReview',
              status: ok
                ? { authenticated: true, user: { username: 'system:serviceaccount:ops:keyroll', uid: 'uid-keyroll', groups: ['system:serviceaccounts'] } }
                : { authenticated: false, error: 'invalid token' },
            }),
          );
        });
      });
      await new Promise<void>((resolve) => tokenReview.listen(0, '127.0.0.1', resolve));
      const port = (tokenReview.address() as { port: number }).port;
      mount = uniqueName('kubernetes');
      await admin.must('POST', `sys/auth/${mount}`, { type: 'kubernetes' });
      await admin.must('POST', `auth/${mount}/config`, {
        kubernetes_host: `http://127.0.0.1:${String(port)}`,
        disable_local_ca_jwt: true,
        kubernetes_ca_cert: UNUSED_KUBERNETES_CA,
      });
      await admin.must('POST', `auth/${mount}/role/keyroll`, {
        bound_service_account_names: ['keyroll'],
        bound_service_account_namespaces: ['ops'],
        token_policies: [ALL_POLICY],
        token_ttl: '1h',
      });
      dir = await mkdtemp(join(tmpdir(), 'keyroll-k8s-'));
      await writeFile(join(dir, 'token'), `${jwt}\n`);
      await writeFile(join(dir, 'other-token'), fakeServiceAccountJwt('ops', 'intruder'));
    });
    afterAll(async () => {
      await new Promise((resolve) => tokenReview.close(resolve));
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition -- unset when beforeAll failed early
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    it('logs in with the service-account JWT file and writes', async () => {
      const backend = makeBackend(vault, { auth: { method: 'kubernetes', role: 'keyroll', mount, jwtFile: join(dir, 'token') } });
      const t = target();
      await backend.preflight(t);
      const record = makeRecord();
      await backend.writeSecret(t, record);
      expect((await admin.readData(t.path)).data).toEqual({ apiKey: record.secret.reveal() });
      await backend.close();
    });

    it('is denied for a service account the role does not bind', async () => {
      const backend = makeBackend(vault, { auth: { method: 'kubernetes', role: 'keyroll', mount, jwtFile: join(dir, 'other-token') } });
      await expect(backend.preflight(target())).rejects.toMatchObject({ code: 'KR_BACKEND_DENIED' });
      await backend.close();
    });

    it('is denied when the JWT file is missing', async () => {
      const backend = makeBackend(vault, { auth: { method: 'kubernetes', role: 'keyroll', mount, jwtFile: join(dir, 'missing') } });
      await expect(backend.preflight(target())).rejects.toMatchObject({ code: 'KR_BACKEND_DENIED' });
      await backend.close();
    });
  });

  describe('vault backend: namespace', () => {
    it('writes inside the configured namespace (X-Vault-Namespace)', async () => {
      const namespace = uniqueName('team');
      await admin.must('POST', `sys/namespaces/${namespace}`, {});
      await admin.must('POST', 'sys/mounts/secret', { type: 'kv', options: { version: '2' } }, { 'x-vault-namespace': namespace });
      const backend = makeBackend(vault, { namespace });
      const t = target();
      const record = makeRecord();
      await backend.preflight(t);
      await backend.writeSecret(t, record);
      expect((await admin.readData(t.path, { 'x-vault-namespace': namespace })).data).toEqual({ apiKey: record.secret.reveal() });
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
        const trusting = makeBackend(vault, { address: tls.address, token: tls.rootToken, caFile: tls.caFile });
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

  async function lastRenewal(token: string): Promise<unknown> {
    const body = await admin.must('POST', 'auth/token/lookup', { token });
    return (body.data as { last_renewal_time?: unknown }).last_renewal_time;
  }

  async function revokeTokensOfMount(authMount: string): Promise<void> {
    const list = await admin.must('LIST', 'auth/token/accessors');
    for (const accessor of (list.data as { keys: string[] }).keys) {
      const info = await admin.call('POST', 'auth/token/lookup-accessor', { accessor });
      const path = (info.body as { data?: { path?: string } } | undefined)?.data?.path ?? '';
      if (path.startsWith(`auth/${authMount}/`)) await admin.must('POST', 'auth/token/revoke-accessor', { accessor });
    }
  }
}

// OpenBao insists on a CA certificate for the Kubernetes API even when it is reached over plain
// HTTP on loopback, as here; this throwaway self-signed one (no key kept anywhere) is never used.
const UNUSED_KUBERNETES_CA = `-----BEGIN CERTIFICATE-----
MIIBoTCCAUegAwIBAgIUfd70dzP2RAWuMSutz1+VCq+hbccwCgYIKoZIzj0EAwIw
JTEjMCEGA1UEAwwaa2V5cm9sbC10ZXN0LWt1YmVybmV0ZXMtY2EwIBcNMjYxMTIx
MTMxNzQ3WhgPMjEyNjEwMjgxMzE3NDdaMCUxIzAhBgNVBAMMGmtleXJvbGwtdGVz
dC1rdWJlcm5ldGVzLWNhMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE3wDtZTe/
Ck/r8ix3qN25ZsUEf9DRnJdVge0K3gICFcY3Y+HIkFPoQISS2RDXGrawNLugtfXV
cK6D/fCHLNp/JqNTMFEwHQYDVR0OBBYEFFhs4ZmsN3VpLq61eWbPrqAkZRJ8MB8G
A1UdIwQYMBaAFFhs4ZmsN3VpLq61eWbPrqAkZRJ8MA8GA1UdEwEB/wQFMAMBAf8w
CgYIKoZIzj0EAwIDSAAwRQIhALL+JxQ+iXDMH2FDrLIlV53keyNi+pxKGh1un//X
8sIEAiAK/wiEehjWbqTA99dcyV5s4grSUrXZNA5lTKldAL16Iw==
-----END CERTIFICATE-----
`;

async function closedPort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as { port: number }).port;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** An unsigned-looking service-account JWT; the TokenReview stand-in decides validity. */
function fakeServiceAccountJwt(namespace: string, name: string): string {
  const b64 = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
  const header = { alg: 'RS256', typ: 'JWT', kid: 'test' };
  const claims = {
    iss: 'kubernetes/serviceaccount',
    sub: `system:serviceaccount:${namespace}:${name}`,
    'kubernetes.io/serviceaccount/namespace': namespace,
    'kubernetes.io/serviceaccount/service-account.name': name,
    'kubernetes.io/serviceaccount/service-account.uid': `uid-${name}`,
  };
  return `${b64(header)}.${b64(claims)}.${Buffer.from('not-a-real-signature').toString('base64url')}`;
}
