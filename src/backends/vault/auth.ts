// The Vault token keyroll uses, kept valid for as long as the backend lives (a daemon runs for
// months): a static token from a reference, or a login by Kubernetes service-account JWT or by
// AppRole. A renewable token is renewed at 2/3 of its TTL; one that cannot be renewed (or
// whose renewal fails) is replaced by a fresh login, or, for the token method, by re-reading
// the reference (a mounted Kubernetes Secret may have been rotated). Renewal is checked before
// each request against the injected clock, so no timer keeps a CronJob process alive.
// The one exception is the write after the roll (invariant 2: it must be the first I/O after the
// roll answer): it uses the current token for as long as it has not expired, and the engine
// calls `ensureFresh` before the roll so that the token outlives the roll and the store.
import { readFile } from 'node:fs/promises';
import { Secret } from '../../audit/public/secret.ts';
import { resolveRef } from '../../refs/public/secret-ref.ts';
import { BackendError, type BackendOperation } from '../errors.ts';
import type { VaultClient, VaultCall } from './client.ts';
import type { VaultAuth } from './config.ts';
import { TokenLookupResponse, VaultAuthResponse } from './schema.ts';

interface CurrentToken {
  token: Secret;
  renewable: boolean;
  /** Seconds; 0 means the token does not expire. */
  ttlSeconds: number;
  /** Epoch ms (injected clock) after which the token is renewed or replaced. */
  refreshAt: number;
  /** Epoch ms (injected clock) when the token expires; meaningless when ttlSeconds is 0. */
  expiresAt: number;
  /**
   * The policies `auth/token/lookup-self` named for this token, once asked (a new or renewed token
   * asks again); the TTL left is worked out from expiresAt when asked.
   */
  policies?: string[];
}

/** The part of a `lookup-self` answer preflight reports. */
export interface TokenLookup {
  ttl: number;
  policies: string[];
}

/**
 * How a call may treat a token that is due for renewal: `renew-when-due` renews it at 2/3 of
 * its TTL (every call but one); `until-expiry` keeps using it until it has actually expired (the
 * data write after the roll, which must not be preceded by a renewal).
 */
export type TokenUse = 'renew-when-due' | 'until-expiry';

export interface VaultTokenSourceOptions {
  client: VaultClient;
  auth: VaultAuth;
  backend: string;
  now: () => Date;
  env: NodeJS.ProcessEnv;
}

export class VaultTokenSource {
  readonly #options: VaultTokenSourceOptions;
  #current: CurrentToken | undefined;
  #pending: Promise<CurrentToken> | undefined;

  constructor(options: VaultTokenSourceOptions) {
    this.#options = options;
  }

  get method(): VaultAuth['method'] {
    return this.#options.auth.method;
  }

  /** A valid token, logging in or renewing first when due. Concurrent callers share one refresh. */
  async token(
    operation: BackendOperation,
    target: string,
    use: TokenUse = 'renew-when-due',
  ): Promise<Secret> {
    const current = this.#current;
    if (current !== undefined) {
      const now = this.#options.now().getTime();
      if (current.ttlSeconds === 0 || now < current.refreshAt) return current.token;
      // Past 2/3 of its TTL but not expired: still good for the one request that must not wait.
      if (use === 'until-expiry' && now < current.expiresAt) return current.token;
    }
    return (await this.#refreshShared(current, operation, target)).token;
  }

  /**
   * Makes sure the token stays valid for `minValidityMs` more (renewing or logging in again
   * now, before the roll, instead of inside the write after it). Throws KR_BACKEND_DENIED when
   * not even a fresh token lives that long (a token at its max TTL, a static token near its end).
   */
  async ensureFresh(minValidityMs: number, operation: BackendOperation, target: string): Promise<void> {
    const lacking = (token: CurrentToken | undefined): boolean => {
      if (token === undefined) return true;
      if (token.ttlSeconds === 0) return false;
      const now = this.#options.now().getTime();
      return now >= token.refreshAt || token.expiresAt - now < minValidityMs;
    };
    if (!lacking(this.#current)) return;
    let fresh = await this.#refreshShared(this.#current, operation, target);
    // A renewal capped by the max TTL may still fall short; a new login starts a new max TTL.
    if (lacking(fresh) && this.method !== 'token')
      fresh = await this.#refreshShared(undefined, operation, target);
    if (fresh.ttlSeconds !== 0 && fresh.expiresAt - this.#options.now().getTime() < minValidityMs) {
      const left = Math.max(0, Math.floor((fresh.expiresAt - this.#options.now().getTime()) / 1000));
      throw new BackendError(
        'KR_BACKEND_DENIED',
        `vault backend ${this.#options.backend}: ${operation} of ${target} failed, the Vault token expires in ${String(left)}s, sooner than the ${String(Math.ceil(minValidityMs / 1000))}s a rotation needs, and cannot be renewed further`,
        { backend: this.#options.backend, kind: 'vault', operation, path: target },
      );
    }
  }

  /**
   * The lookup-self answer for `token` if it is still the current token and was looked up since
   * it was issued, read or last renewed: preflight needs one lookup per token, not one per key.
   */
  lookupOf(token: Secret): TokenLookup | undefined {
    const current = this.#current;
    if (current?.token !== token || current.policies === undefined) return undefined;
    // The time left now, from the lifetime the lookup (or the login or renewal) reported.
    const ttl =
      current.ttlSeconds === 0
        ? 0
        : Math.max(0, Math.floor((current.expiresAt - this.#options.now().getTime()) / 1000));
    return { ttl, policies: current.policies };
  }

  /** Keeps the policies of a lookup-self answer with `token`'s state, unless the token changed meanwhile. */
  rememberLookup(token: Secret, lookup: TokenLookup): void {
    if (this.#current?.token === token) this.#current.policies = lookup.policies;
  }

  /** Forgets the token (after a 403 that a fresh login may cure). */
  invalidate(): void {
    this.#current = undefined;
  }

  /** One refresh at a time: concurrent callers wait for the same renewal or login. */
  async #refreshShared(
    current: CurrentToken | undefined,
    operation: BackendOperation,
    target: string,
  ): Promise<CurrentToken> {
    this.#pending ??= this.#refresh(current, operation, target).finally(() => {
      this.#pending = undefined;
    });
    this.#current = await this.#pending;
    return this.#current;
  }

  async #refresh(
    current: CurrentToken | undefined,
    operation: BackendOperation,
    target: string,
  ): Promise<CurrentToken> {
    if (current?.renewable === true) {
      try {
        return await this.#renew(current, operation, target);
      } catch (error) {
        // A token past its max TTL or revoked cannot be renewed; a fresh one is the cure.
        if (
          !(error instanceof BackendError) ||
          error.code === 'KR_BACKEND_UNAVAILABLE' ||
          error.code === 'KR_BACKEND_TIMEOUT'
        )
          throw error;
      }
    }
    return this.#obtain(operation, target);
  }

  async #renew(current: CurrentToken, operation: BackendOperation, target: string): Promise<CurrentToken> {
    const sentAt = this.#options.now().getTime();
    const call: VaultCall = {
      method: 'POST',
      apiPath: 'auth/token/renew-self',
      body: { increment: `${String(current.ttlSeconds)}s` },
      token: current.token,
      operation,
      target,
    };
    const { auth } = await this.#options.client.json(call, VaultAuthResponse);
    // A renewal capped by the max TTL gives less and less time; below a third of the original
    // TTL a new login is cheaper than renewing again and again.
    const capped = auth.lease_duration < current.ttlSeconds / 3 && this.method !== 'token';
    if (capped) return this.#obtain(operation, target);
    return this.#tokenState(current.token, auth.renewable, auth.lease_duration, sentAt);
  }

  async #obtain(operation: BackendOperation, target: string): Promise<CurrentToken> {
    const { auth, client, env } = this.#options;
    // Lifetimes count from before the request: the server's clock started them no later.
    const sentAt = this.#options.now().getTime();
    if (auth.method === 'token') {
      const token = await this.#resolve(auth.token, env, operation, target);
      const call: VaultCall = { method: 'GET', apiPath: 'auth/token/lookup-self', token, operation, target };
      const { data } = await client.json(call, TokenLookupResponse);
      // The lookup that reads the token's lifetime is also the one preflight reports.
      return {
        ...this.#tokenState(token, data.renewable ?? false, data.ttl, sentAt),
        policies: data.policies ?? [],
      };
    }
    let body: Record<string, string>;
    let mount: string;
    if (auth.method === 'kubernetes') {
      // A Secret from the start: the service-account JWT is a credential, so the sanitizer must
      // know it, and it goes nowhere but the login body (never into an error; an fs error names
      // the file, not its content).
      let jwt: Secret;
      try {
        // Pinned for a day: projected tokens live an hour by default and the file is re-read at each login.
        jwt = new Secret((await readFile(auth.jwtFile, 'utf8')).trim()).pinned(24 * 60 * 60 * 1000);
      } catch (error) {
        throw this.#error(
          'KR_BACKEND_DENIED',
          operation,
          target,
          `cannot read the service-account token ${auth.jwtFile}`,
          error,
        );
      }
      body = { role: auth.role, jwt: jwt.reveal() };
      mount = auth.mount;
    } else {
      const roleId = /^(env|file):/.test(auth.roleId)
        ? (await this.#resolve(auth.roleId, env, operation, target)).reveal()
        : auth.roleId;
      const secretId = await this.#resolve(auth.secretId, env, operation, target);
      body = { role_id: roleId, secret_id: secretId.reveal() };
      mount = auth.mount;
    }
    const call: VaultCall = {
      method: 'POST',
      apiPath: `auth/${encodeMount(mount)}/login`,
      body,
      operation,
      target,
    };
    const answer = await client.send(call);
    if (answer.status < 200 || answer.status >= 300) {
      // A refused login is a credential problem whatever the status (Vault answers 400 for a bad secret_id).
      const error = client.httpError(call, answer);
      if (answer.status >= 400 && answer.status < 500) {
        throw this.#error(
          'KR_BACKEND_DENIED',
          operation,
          target,
          `${auth.method} login refused (HTTP ${String(answer.status)})`,
          error,
        );
      }
      throw error;
    }
    const parsed = client.parse(call, answer, VaultAuthResponse);
    return this.#tokenState(
      new Secret(parsed.auth.client_token),
      parsed.auth.renewable,
      parsed.auth.lease_duration,
      sentAt,
    );
  }

  #tokenState(token: Secret, renewable: boolean, ttlSeconds: number, since: number): CurrentToken {
    // Pinned in the sanitizer for its lifetime (renewals extend it; ttl 0 never expires).
    token.pinned(ttlSeconds === 0 ? undefined : ttlSeconds * 1000);
    const refreshAt = since + Math.floor((ttlSeconds * 1000 * 2) / 3);
    return { token, renewable, ttlSeconds, refreshAt, expiresAt: since + ttlSeconds * 1000 };
  }

  async #resolve(
    ref: string,
    env: NodeJS.ProcessEnv,
    operation: BackendOperation,
    target: string,
  ): Promise<Secret> {
    try {
      return await resolveRef(ref, env);
    } catch (error) {
      throw this.#error(
        'KR_BACKEND_DENIED',
        operation,
        target,
        `cannot resolve the credential reference ${ref}`,
        error,
      );
    }
  }

  #error(
    code: 'KR_BACKEND_DENIED',
    operation: BackendOperation,
    target: string,
    problem: string,
    cause: unknown,
  ): BackendError {
    return new BackendError(
      code,
      `vault backend ${this.#options.backend}: ${operation} of ${target} failed, ${problem}`,
      {
        backend: this.#options.backend,
        kind: 'vault',
        operation,
        path: target,
        cause,
      },
    );
  }
}

export function encodeMount(mount: string): string {
  return mount
    .replace(/^\/+|\/+$/g, '')
    .split('/')
    .map(encodeURIComponent)
    .join('/');
}
