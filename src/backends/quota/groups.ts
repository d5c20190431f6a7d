// The request quotas each kind of backend counts its requests against (the `group` of a quota
// event, docs/metrics.md): AWS Secrets Manager's per-action groups, Vault/OpenBao's one rate limit,
// none for a file. Typed by the kind, so a new kind without an entry fails the type check.
import { AWS_DOCUMENTED_QUOTAS } from '../aws/quotas.ts';
import type { BackendKind } from '../types.ts';

/** Vault/OpenBao: one rate-limit quota for every request (a 429 says which request hit it, not which quota). */
export const VAULT_QUOTA_GROUP = 'request';

export const QUOTA_GROUPS: Readonly<Record<BackendKind, readonly string[]>> = {
  aws: Object.keys(AWS_DOCUMENTED_QUOTAS),
  vault: [VAULT_QUOTA_GROUP],
  file: [],
};
