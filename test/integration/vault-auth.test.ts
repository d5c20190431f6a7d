// Vault auth methods against a real OpenBao dev server: token renewal, AppRole login and
// re-login, Kubernetes service-account login (with a loopback stand-in for the TokenReview API).
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sanitizeText } from '../../src/audit/sanitize.ts';
import { BackendError } from '../../src/backends/errors.ts';
import type { StoreTarget } from '../../src/backends/types.ts';
import { createTestClock, makeRecord } from '../backends/contract.ts';
import { useTempDir } from '../support/temp-dir.ts';
import { vaultServer } from './servers.ts';
import { makeVaultBackend as makeBackend, uniqueName, vaultAdmin } from './vault-admin.ts';

const server = vaultServer();

if (server === undefined) {
  describe.skip('vault auth (OpenBao not available; see the global setup message)', () => {
    it('needs OpenBao', () => undefined);
  });
} else {
  const vault = server;
  const admin = vaultAdmin(vault);
  const run = uniqueName('auth');
  let n = 0;
  const target = (): StoreTarget => {
    n += 1;
    return {
      path: `apps/${run}/key-${String(n)}`,
      shape: { format: 'raw', secretField: 'apiKey', fields: [] },
    };
  };
  // Login methods cannot mint root tokens; tests that are not about permissions use this one.
  const ALL_POLICY = 'keyroll-test-everything';
  beforeAll(async () => {
    await admin.putPolicy(
      ALL_POLICY,
      'path "*" { capabilities = ["create", "read", "update", "delete", "list", "sudo"] }',
    );
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
      await admin.must('POST', `auth/${mount}/role/keyroll`, {
        token_policies: [ALL_POLICY],
        token_ttl: '1h',
      });
      roleId = ((await admin.must('GET', `auth/${mount}/role/keyroll/role-id`)).data as { role_id: string })
        .role_id;
      const secret = await admin.must('POST', `auth/${mount}/role/keyroll/secret-id`, {});
      secretIdEnv.KR_SECRET_ID = (secret.data as { secret_id: string }).secret_id;
    });

    it('logs in with role_id and secret_id and writes', async () => {
      const backend = makeBackend(vault, {
        auth: { method: 'approle', roleId, secretId: 'env:KR_SECRET_ID', mount },
        env: secretIdEnv,
      });
      const t = target();
      expect((await backend.preflight(t)).exists).toBe(false);
      const record = makeRecord();
      await backend.writeSecret(t, record);
      expect((await admin.readData(t.path)).data).toEqual({ apiKey: record.secret.reveal() });
      await backend.close();
    });

    it('is denied with a wrong secret_id', async () => {
      const backend = makeBackend(vault, {
        auth: { method: 'approle', roleId, secretId: 'env:KR_SECRET_ID', mount },
        env: { KR_SECRET_ID: 'wrong-secret-id-0000' },
      });
      await expect(backend.preflight(target())).rejects.toMatchObject({
        code: 'KR_BACKEND_DENIED',
        operation: 'preflight',
      });
      await backend.close();
    });

    it('logs in again when its token was revoked behind its back', async () => {
      const backend = makeBackend(vault, {
        auth: { method: 'approle', roleId, secretId: 'env:KR_SECRET_ID', mount },
        env: secretIdEnv,
      });
      await backend.readState(target());
      await revokeTokensOfMount(mount);
      await expect(backend.readState(target())).resolves.toMatchObject({ exists: false });
      await backend.close();
    });
  });

  describe('vault backend: kubernetes auth', () => {
    const jwt = fakeServiceAccountJwt('ops', 'keyroll');
    let tokenReview: Server;
    const jwtDir = useTempDir('keyroll-k8s-', 'file');
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
                ? {
                    authenticated: true,
                    user: {
                      username: 'system:serviceaccount:ops:keyroll',
                      uid: 'uid-keyroll',
                      groups: ['system:serviceaccounts'],
                    },
                  }
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
      await writeFile(join(jwtDir.path(), 'token'), `${jwt}\n`);
      await writeFile(join(jwtDir.path(), 'other-token'), fakeServiceAccountJwt('ops', 'intruder'));
    });
    afterAll(async () => {
      await new Promise((resolve) => tokenReview.close(resolve));
    });

    it('logs in with the service-account JWT file and writes', async () => {
      const backend = makeBackend(vault, {
        auth: { method: 'kubernetes', role: 'keyroll', mount, jwtFile: join(jwtDir.path(), 'token') },
      });
      const t = target();
      await backend.preflight(t);
      const record = makeRecord();
      await backend.writeSecret(t, record);
      expect((await admin.readData(t.path)).data).toEqual({ apiKey: record.secret.reveal() });
      await backend.close();
    });

    it('is denied for a service account the role does not bind', async () => {
      const backend = makeBackend(vault, {
        auth: { method: 'kubernetes', role: 'keyroll', mount, jwtFile: join(jwtDir.path(), 'other-token') },
      });
      await expect(backend.preflight(target())).rejects.toMatchObject({ code: 'KR_BACKEND_DENIED' });
      await backend.close();
    });

    it('treats the service-account JWT as a secret: the sanitizer blanks it and a refused login does not carry it', async () => {
      const refusedJwt = await readFile(join(jwtDir.path(), 'other-token'), 'utf8');
      const backend = makeBackend(vault, {
        auth: { method: 'kubernetes', role: 'keyroll', mount, jwtFile: join(jwtDir.path(), 'other-token') },
      });
      const error: unknown = await backend.preflight(target()).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(BackendError);
      const texts: string[] = [];
      for (let current: unknown = error; current instanceof Error; current = current.cause) {
        texts.push(current.message, String(current.stack), inspect(current, { depth: 8 }));
      }
      texts.push(JSON.stringify((error as BackendError).toFields()));
      for (const text of texts) expect(text).not.toContain(refusedJwt);
      expect(sanitizeText(`login with ${refusedJwt}`)).toBe('login with [REDACTED]');
      await backend.close();
    });

    it('is denied when the JWT file is missing', async () => {
      const backend = makeBackend(vault, {
        auth: { method: 'kubernetes', role: 'keyroll', mount, jwtFile: join(jwtDir.path(), 'missing') },
      });
      await expect(backend.preflight(target())).rejects.toMatchObject({ code: 'KR_BACKEND_DENIED' });
      await backend.close();
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
      if (path.startsWith(`auth/${authMount}/`))
        await admin.must('POST', 'auth/token/revoke-accessor', { accessor });
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
