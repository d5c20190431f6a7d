// Where keyroll's own bearer credential comes from. A provider hands out a Secret on every call and
// describes itself without the value ("file:/var/run/keyroll/token"), so logs and errors can say
// which credential failed without ever holding it (invariant 3).
import { Secret } from '../audit/public/secret.ts';
import { resolveRef } from '../refs/public/secret-ref.ts';

export interface CredentialProvider {
  /** Where the credential comes from, e.g. "file:/var/run/keyroll/token"; never the value. */
  readonly description: string;
  token(): Promise<Secret>;
  /** Drops any cached token (the API answered 401), so the next token() fetches a fresh one. */
  invalidate?(): void;
}

/** A fixed credential (tests, or a value already resolved by the caller). */
export function staticCredential(value: Secret, description = 'static credential'): CredentialProvider {
  return {
    description,
    token: () => Promise.resolve(value),
  };
}

/**
 * A credential behind a policy reference (`env:NAME` or `file:/path`), resolved on every call:
 * a Kubernetes-mounted token that the kubelet rotates is picked up without a restart.
 * The RefError from resolveRef names the reference and the errno, never file content.
 * `env` is where `env:NAME` is looked up (the AWS-native function's own environment object).
 */
export function refCredential(ref: string, env: NodeJS.ProcessEnv = process.env): CredentialProvider {
  return {
    description: ref,
    token: () => resolveRef(ref, env),
  };
}

export { oauthClientCredentials } from './oauth-credentials.ts';
export type { OAuthClientCredentialsOptions } from './oauth-credentials.ts';
