// What authenticates keyroll to the trace collector, taken apart so each part is a secret of its
// own (issue 27, finding 6). A header value is pinned whole, but text rarely carries it whole: an
// exporter error or a proxy's answer shows the bearer token without its `Bearer `, a URL with its
// `?api-key=` value, a user and password from `https://user:pw@host`. Each part is pinned, raw
// and percent-decoded; the sanitizer adds the other spellings (base64, hex, JSON-escaped) itself.
// Parts under 8 characters are blanked only after a credential marker (docs/sanitizer.md).
//
// And a warning: headers, a URL's user or password and its query string travel in clear over
// `http://`, readable by anyone on the path, unless the collector is on this host (loopback, by
// the same rule as every endpoint of the policy: src/http/transport.ts).
import { isLoopbackHost } from '../http/public/transport.ts';

const HEADER_VARIABLES = ['OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_TRACES_HEADERS'] as const;
const ENDPOINT_VARIABLES = ['OTEL_EXPORTER_OTLP_ENDPOINT', 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] as const;
/** Where the exporter sends when only OTEL_TRACES_EXPORTER=otlp is set. */
const DEFAULT_ENDPOINT = 'http://localhost:4318';

function read(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

/** The text and, when it differs, its percent-decoded form. */
function withDecoded(raw: string): string[] {
  try {
    const decoded = decodeURIComponent(raw);
    return decoded === raw ? [raw] : [raw, decoded];
  } catch {
    // Not percent-encoded text: the raw value is the one that travels.
    return [raw];
  }
}

/** `Bearer <token>`, `Basic <base64>`, `ApiKey <key>`: a scheme, then one token (RFC 9110's token68). */
const SCHEME_AND_TOKEN = /^([A-Za-z][\w!#$%&'*+.^`|~-]*)\s+(\S+)$/;

/** A header value's parts: the value, the token after an auth scheme, a Basic credential's user and password. */
function headerValueParts(value: string): string[] {
  const parts = [value];
  const match = SCHEME_AND_TOKEN.exec(value);
  const token = match?.[2];
  if (match === null || token === undefined) return parts;
  parts.push(token);
  if (match[1]?.toLowerCase() === 'basic') {
    const decoded = Buffer.from(token, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    // Only a credential that decodes to `user:password` (base64 of anything else is no Basic credential).
    if (
      colon > 0 &&
      Buffer.from(decoded, 'utf8').toString('base64').replace(/=+$/, '') === token.replace(/=+$/, '')
    )
      parts.push(decoded, decoded.slice(0, colon), decoded.slice(colon + 1));
  }
  return parts;
}

/** Every header value of OTEL_EXPORTER_OTLP_HEADERS and …_TRACES_HEADERS (`k=v,k2=v2`, values percent-encoded). */
function headerParts(env: NodeJS.ProcessEnv): string[] {
  const values: string[] = [];
  for (const name of HEADER_VARIABLES) {
    for (const pair of read(env, name)?.split(',') ?? []) {
      const at = pair.indexOf('=');
      if (at < 0) continue;
      const raw = pair.slice(at + 1).trim();
      if (raw === '') continue;
      for (const form of withDecoded(raw)) values.push(...headerValueParts(form));
    }
  }
  return values;
}

/** A URL's user, password and each query parameter's value, raw and decoded. */
function endpointParts(url: URL): string[] {
  const values = [...withDecoded(url.username), ...withDecoded(url.password)];
  for (const pair of url.search.replace(/^\?/, '').split('&')) {
    const at = pair.indexOf('=');
    if (at >= 0) values.push(...withDecoded(pair.slice(at + 1)));
  }
  // URLSearchParams decodes `+` as a space, as a form would: that spelling too.
  for (const value of url.searchParams.values()) values.push(value);
  return values;
}

function parseUrl(text: string): URL | undefined {
  try {
    return new URL(text);
  } catch {
    // The exporter reports a URL it cannot use.
    return undefined;
  }
}

/** Every part of the collector's credentials, from the headers and both endpoint variables: the secrets to pin. */
export function collectorCredentials(env: NodeJS.ProcessEnv): string[] {
  const values = headerParts(env);
  for (const name of ENDPOINT_VARIABLES) {
    const url = parseUrl(read(env, name) ?? '');
    if (url !== undefined) values.push(...endpointParts(url));
  }
  return [...new Set(values.filter((value) => value !== ''))];
}

/**
 * The one warning when credentials go to the collector in clear: a fixed sentence, then the fields
 * (the endpoint's scheme, host and port only, and which kinds of credential). Undefined when
 * nothing is sent in clear: https, a loopback collector, or nothing that authenticates.
 */
export function plainHttpCredentialWarning(env: NodeJS.ProcessEnv): string | undefined {
  // The endpoint the exporter sends to: the traces one as is, else the base one, else its default.
  const url = parseUrl(
    read(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') ??
      read(env, 'OTEL_EXPORTER_OTLP_ENDPOINT') ??
      DEFAULT_ENDPOINT,
  );
  if (url === undefined || url.protocol !== 'http:' || isLoopbackHost(url.hostname)) return undefined;
  const carrying = [
    HEADER_VARIABLES.some((name) => read(env, name) !== undefined) ? 'headers' : undefined,
    url.username !== '' || url.password !== '' ? 'url-userinfo' : undefined,
    url.search !== '' ? 'url-query' : undefined,
  ].filter((kind) => kind !== undefined);
  if (carrying.length === 0) return undefined;
  return `the collector's credentials go over plain HTTP, readable on the network path; use an https:// endpoint (endpoint=${url.protocol}//${url.host} carrying=${carrying.join(',')})`;
}
