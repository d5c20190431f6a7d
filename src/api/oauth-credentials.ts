// keyroll's own credential as OAuth2 client credentials (RFC 6749 §4.4): a token fetched from the
// token URL, cached, and refreshed before it expires so a roll never starts with a token that dies
// mid-run. The client secret is itself a CredentialProvider (a reference), and neither it nor the
// access token, nor the token endpoint's body, ever reaches an error message.
import { getGlobalDispatcher, type Dispatcher } from 'undici';
import { z } from 'zod';
import { Secret } from '../audit/public/secret.ts';
import type { CredentialProvider } from './credentials.ts';
import { CredentialError } from './errors.ts';
import { headerValue, parseJsonQuietly, readBodyText } from './http.ts';

export interface OAuthClientCredentialsOptions {
  tokenUrl: string;
  clientId: string;
  clientSecret: CredentialProvider;
  scope?: string;
  /**
   * The API the token is for, sent as the form field `audience` (Auth0, Okta and other providers
   * issue tokens per audience; RFC 6749 lets a server ignore fields it does not know, as the emulator does).
   */
  audience?: string;
  /** Refresh this long before expiry (default 60 s; at most half the token's lifetime). */
  refreshBeforeMs?: number;
  dispatcher?: Dispatcher;
  now?: () => number;
  /**
   * How the client authenticates to the token endpoint: `post` puts client_id and client_secret
   * in the form body (default; what most providers and the emulator accept), `basic` uses HTTP
   * Basic as RFC 6749 §2.3.1 prefers.
   */
  authMethod?: 'post' | 'basic';
  /** Headers and body timeout of the token request, and its total deadline (default 10 s). */
  timeoutMs?: number;
}

const TokenBody = z.looseObject({
  access_token: z.string().min(1),
  token_type: z.string().refine((type) => type.toLowerCase() === 'bearer', 'token_type must be Bearer'),
  // Some providers send the number as a string.
  expires_in: z.union([z.number().positive(), z.string().regex(/^\d+$/).transform(Number)]).optional(),
});

const TokenErrorBody = z.looseObject({ error: z.string() });

interface CachedToken {
  token: Secret;
  /** When to fetch a new one. */
  refreshAt: number;
  /** When the token stops working; Infinity when the endpoint gave no expires_in. */
  expiresAt: number;
}

const DEFAULT_REFRESH_BEFORE_MS = 60_000;
// A token answer is a few hundred bytes (a JWT access token a few KiB); the read stops here.
const MAX_TOKEN_ANSWER_BYTES = 64 * 1024;

export function oauthClientCredentials(opts: OAuthClientCredentialsOptions): CredentialProvider {
  const description = `oauth2 client ${opts.clientId} at ${opts.tokenUrl}`;
  const now = opts.now ?? Date.now;
  let cached: CachedToken | undefined;
  let inflight: Promise<Secret> | undefined;

  async function refresh(): Promise<Secret> {
    try {
      const fetchedAt = now();
      const { token, lifetimeMs } = await fetchToken(opts, description);
      const refreshBefore = Math.min(opts.refreshBeforeMs ?? DEFAULT_REFRESH_BEFORE_MS, lifetimeMs / 2);
      cached = {
        token,
        expiresAt: fetchedAt + lifetimeMs,
        refreshAt: fetchedAt + lifetimeMs - refreshBefore,
      };
      return token;
    } catch (error) {
      // An early refresh that fails is not yet a failure: the cached token still works until it expires.
      if (cached !== undefined && now() < cached.expiresAt) return cached.token;
      throw error;
    }
  }

  return {
    description,
    token(): Promise<Secret> {
      if (cached !== undefined && now() < cached.refreshAt) return Promise.resolve(cached.token);
      // Concurrent callers share one token request.
      inflight ??= refresh().finally(() => {
        inflight = undefined;
      });
      return inflight;
    },
    invalidate(): void {
      cached = undefined;
    },
  };
}

async function fetchToken(
  opts: OAuthClientCredentialsOptions,
  description: string,
): Promise<{ token: Secret; lifetimeMs: number }> {
  let clientSecret: Secret;
  try {
    clientSecret = await opts.clientSecret.token();
  } catch (error) {
    throw new CredentialError(
      description,
      `cannot read the OAuth client secret (${opts.clientSecret.description})`,
      { cause: error },
    );
  }

  const form = new URLSearchParams({ grant_type: 'client_credentials' });
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    accept: 'application/json',
  };
  if (opts.authMethod === 'basic') {
    const pair = `${encodeURIComponent(opts.clientId)}:${encodeURIComponent(clientSecret.reveal())}`;
    headers['authorization'] = `Basic ${Buffer.from(pair, 'utf8').toString('base64')}`;
  } else {
    form.set('client_id', opts.clientId);
    form.set('client_secret', clientSecret.reveal());
  }
  if (opts.scope !== undefined) form.set('scope', opts.scope);
  if (opts.audience !== undefined) form.set('audience', opts.audience);

  const url = new URL(opts.tokenUrl);
  const timeout = opts.timeoutMs ?? 10_000;
  let response: Dispatcher.ResponseData;
  let text: string;
  try {
    response = await (opts.dispatcher ?? getGlobalDispatcher()).request({
      origin: url.origin,
      path: `${url.pathname}${url.search}`,
      method: 'POST',
      headers,
      body: form.toString(),
      headersTimeout: timeout,
      bodyTimeout: timeout,
      // A total deadline: the two timeouts above restart with every byte of a dripping answer.
      signal: AbortSignal.timeout(timeout),
    });
    ({ text } = await readBodyText(response.body, MAX_TOKEN_ANSWER_BYTES));
  } catch (error) {
    // undici errors name the socket or the timeout, never the request body.
    throw new CredentialError(description, 'the OAuth token request failed before an answer', {
      cause: error,
      retryable: true,
    });
  }

  const parsed = parseJsonQuietly(text);
  if (response.statusCode < 200 || response.statusCode > 299) {
    const oauthError = parsed.ok ? TokenErrorBody.safeParse(parsed.value) : undefined;
    const init: { status: number; oauthError?: string; retryable: boolean } = {
      status: response.statusCode,
      retryable: response.statusCode >= 500 || response.statusCode === 429,
    };
    if (oauthError?.success === true) init.oauthError = oauthError.data.error;
    throw new CredentialError(
      description,
      `the OAuth token endpoint refused the request: HTTP ${response.statusCode}`,
      init,
    );
  }
  const body = parsed.ok ? TokenBody.safeParse(parsed.value) : undefined;
  if (body?.success !== true) {
    const type = headerValue(response.headers, 'content-type') ?? 'none';
    throw new CredentialError(
      description,
      `the OAuth token endpoint answered ${response.statusCode} without a usable bearer token (content-type ${type})`,
    );
  }
  const lifetimeMs =
    body.data.expires_in === undefined ? Number.POSITIVE_INFINITY : body.data.expires_in * 1000;
  // Pinned for its lifetime: a token fetched once and used for hours must stay blanked however
  // many secrets are registered meanwhile.
  return { token: new Secret(body.data.access_token).pinned(lifetimeMs), lifetimeMs };
}
