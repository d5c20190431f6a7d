// POST /oauth/token: the OAuth 2.0 client-credentials grant (RFC 6749 §4.4), an emulator extra
// outside the spec so keyroll's OAuth2 credential can be exercised end to end. Answers follow
// RFC 6749 §5 (token response, `{error}` bodies), not the spec's envelope.
import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { EmulatorContext } from '../pipeline.ts';

type OAuthError = 'invalid_request' | 'invalid_client' | 'unsupported_grant_type' | 'invalid_scope';

export function registerOAuthRoutes(app: FastifyInstance, ctx: EmulatorContext): void {
  app.post<{ Body: unknown }>('/oauth/token', async (request, reply) => {
    void reply.header('cache-control', 'no-store');
    const form = formFields(request.body);
    const basic = basicCredentials(request.headers.authorization);
    const clientId = basic?.clientId ?? form.get('client_id');
    const clientSecret = basic?.clientSecret ?? form.get('client_secret');

    const grantType = form.get('grant_type');
    if (grantType === undefined) return oauthError(reply, 400, 'invalid_request', 'grant_type is required');
    if (grantType !== 'client_credentials')
      return oauthError(reply, 400, 'unsupported_grant_type', 'only client_credentials is supported');
    if (clientId === undefined || clientSecret === undefined)
      return oauthError(reply, 401, 'invalid_client', 'client authentication is required');

    const client = ctx.state.oauthClients.get(clientId);
    if (client === undefined || !sameText(client.clientSecret, clientSecret)) {
      if (basic !== undefined) void reply.header('www-authenticate', 'Basic realm="keyroll-emulator"');
      return oauthError(reply, 401, 'invalid_client', 'client authentication failed');
    }
    const requested = (form.get('scope') ?? '').split(' ').filter((s) => s !== '');
    const unknown = client.scopes.length === 0 ? [] : requested.filter((s) => !client.scopes.includes(s));
    if (unknown.length > 0)
      return oauthError(
        reply,
        400,
        'invalid_scope',
        `scope not granted to this client: ${unknown.join(' ')}`,
      );
    const scope = requested.length > 0 ? requested : client.scopes;

    const issued = ctx.state.issueAccessToken(client.principalId);
    return reply.send({
      access_token: issued.token,
      token_type: 'Bearer',
      expires_in: ctx.state.tokenTtlSeconds,
      ...(scope.length > 0 ? { scope: scope.join(' ') } : {}),
    });
  });
}

/** Form or JSON body fields as strings (other types are ignored, which makes them "missing"). */
function formFields(body: unknown): Map<string, string> {
  const fields = new Map<string, string>();
  if (body instanceof URLSearchParams) {
    for (const [name, value] of body) fields.set(name, value);
  } else if (typeof body === 'object' && body !== null) {
    for (const [name, value] of Object.entries(body)) if (typeof value === 'string') fields.set(name, value);
  }
  return fields;
}

/** client_secret_basic (RFC 6749 §2.3.1): both parts form-urlencoded, then base64. */
function basicCredentials(
  authorization: string | undefined,
): { clientId: string; clientSecret: string } | undefined {
  const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization ?? '');
  if (match?.[1] === undefined) return undefined;
  const decoded = Buffer.from(match[1], 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) return undefined;
  try {
    return {
      clientId: decodeURIComponent(decoded.slice(0, colon).replaceAll('+', ' ')),
      clientSecret: decodeURIComponent(decoded.slice(colon + 1).replaceAll('+', ' ')),
    };
  } catch {
    return undefined;
  }
}

function sameText(expected: string, given: string): boolean {
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

function oauthError(
  reply: FastifyReply,
  status: number,
  error: OAuthError,
  description: string,
): FastifyReply {
  return reply.code(status).send({ error, error_description: description });
}
