// Plain http:// to another machine carries keyroll's bearer token, Vault tokens, the AppRole
// secret id, the service-account JWT and every rolled secret in clear (invariant 3). Each
// endpoint the policy names is refused over http:// unless its host is this machine (the
// emulator, a sidecar) or the endpoint's object says `allowInsecureHttp: true`; `validate`
// warns about every endpoint that says so. URLs that arrive through references (a Slack webhook,
// a webhook's urlRef) and the --pushgateway flag are checked the same way when they are read.
// The backends', alert sinks' and API's own config schemas use these pieces, so they live on the
// http/ floor below all of them (docs/layout.md).
import { z } from 'zod';

/** An http:// or https:// URL (any other scheme is refused by the schema). */
export const HttpUrl = z.url({ protocol: /^https?$/, error: 'must be an http:// or https:// URL' });

/** The field each endpoint's object may carry; `true` accepts http:// to a non-loopback host. */
export const AllowInsecureHttp = z
  .boolean()
  .optional()
  .describe(
    'Accept a plain http:// URL to a host other than this machine (credentials and secrets cross the network in clear). Default false; validate warns.',
  );

/**
 * True for hosts that never leave the machine: `localhost`, 127.0.0.0/8 and ::1. `hostname` is
 * WHATWG URL's (IPv4 already in dotted decimal, IPv6 in brackets and compressed), so `127.1`,
 * `0x7f.0.0.1` and `[0:0::1]` are caught in their normalised forms.
 */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.$/, '');
  if (host === 'localhost') return true;
  if (host === '[::1]') return true;
  return /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

/**
 * The host a URL would reach over plain HTTP when that host is not this machine; undefined for
 * https://, loopback http:// and text that is not a URL (the schema reports those).
 */
export function insecureHttpHost(url: string | URL): string | undefined {
  let parsed: URL;
  try {
    parsed = typeof url === 'string' ? new URL(url) : url;
  } catch {
    return undefined;
  }
  if (parsed.protocol !== 'http:' || isLoopbackHost(parsed.hostname)) return undefined;
  return parsed.hostname;
}

/** The sentence after a field path, e.g. `api.baseUrl: uses plain http:// to "keys.example.com"…`. */
export function insecureHttpMessage(host: string): string {
  return `uses plain http:// to ${JSON.stringify(host)}, which is not this machine, so credentials and secrets would cross the network in clear; use https://, or set allowInsecureHttp: true beside it to accept that`;
}
