import { z } from 'zod';
import { SecretRef } from '../../refs/public/secret-ref.ts';
import { AllowInsecureHttp, HttpUrl } from '../../http/public/transport.ts';

export const VaultAuth = z.discriminatedUnion('method', [
  z.strictObject({
    method: z.literal('token'),
    token: SecretRef,
  }),
  z.strictObject({
    method: z.literal('kubernetes'),
    role: z.string().min(1),
    mount: z.string().min(1).default('kubernetes'),
    jwtFile: z.string().min(1).default('/var/run/secrets/kubernetes.io/serviceaccount/token'),
  }),
  z.strictObject({
    method: z.literal('approle'),
    roleId: z.string().min(1).describe('role_id (not secret) or a reference'),
    secretId: SecretRef,
    mount: z.string().min(1).default('approle'),
  }),
]);
export type VaultAuth = z.infer<typeof VaultAuth>;

export const VaultBackendConfig = z.strictObject({
  kind: z.literal('vault'),
  address: HttpUrl,
  allowInsecureHttp: AllowInsecureHttp,
  /** KV v2 mount point. */
  mount: z.string().min(1).default('secret'),
  /** Vault Enterprise / OpenBao namespace, sent as X-Vault-Namespace. */
  namespace: z.string().min(1).optional(),
  /** PEM file of the CA that signed the server certificate. */
  caFile: z.string().min(1).optional(),
  timeoutMs: z.number().int().positive().default(10_000),
  auth: VaultAuth,
  /** Rate-limit quotas of the server (sys/quotas/rate-limit): how long one call waits out a 429 before it fails (default 60 s). */
  quotas: z.strictObject({ maxWaitMs: z.number().int().positive().default(60_000) }).optional(),
});
export type VaultBackendConfig = z.infer<typeof VaultBackendConfig>;
