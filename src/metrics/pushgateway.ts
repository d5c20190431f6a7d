// The Pushgateway export of `run` and `rotate`: one PUT of the registry at the end of the run.
// Written on undici rather than prom-client's Pushgateway class, which parses URLs with the
// deprecated url.parse (a DEP0169 warning on every push under Node 24), has no default timeout,
// and puts the gateway's answer body into its error message.
import { request, type Dispatcher } from 'undici';
import type { Registry } from 'prom-client';
import { discardBody } from '../api/public/http.ts';
import { KeyrollError, UsageError, errorCode, errorMessage } from '../errors.ts';
import { resolveRef, SecretRef } from '../refs/public/secret-ref.ts';
import { insecureHttpHost } from '../http/public/transport.ts';

export const DEFAULT_PUSH_TIMEOUT_MS = 10_000;

export class MetricsPushError extends KeyrollError {
  override name = 'MetricsPushError';
  /** The gateway's origin (scheme, host, port): never the URL's userinfo. */
  readonly gateway: string;
  readonly status: number | undefined;

  constructor(gateway: string, message: string, options: { status?: number; cause?: unknown } = {}) {
    super('KR_METRICS_PUSH_FAILED', message, { cause: options.cause, retryable: true });
    this.gateway = gateway;
    this.status = options.status;
  }

  override toFields(): Record<string, unknown> {
    return {
      ...super.toFields(),
      gateway: this.gateway,
      ...(this.status === undefined ? {} : { status: this.status }),
    };
  }
}

export interface PushOptions {
  /** Extra grouping labels after the job (e.g. `{ command: 'run', shard: '2-of-8' }`). */
  groupings?: Readonly<Record<string, string>>;
  timeoutMs?: number;
  dispatcher?: Dispatcher;
  /**
   * A reference (env:NAME or file:/path, read at each push) to the gateway's credentials:
   * `user:password` for basic auth, or a whole `Basic …`/`Bearer …` header value. Unlike
   * user:pass in the URL, it shows in neither `ps` nor the pod spec.
   */
  auth?: string;
  /** Accept http:// to a host other than this machine (the credentials and metrics cross in clear). */
  allowInsecureHttp?: boolean;
}

/**
 * Parses a Pushgateway URL (http or https; plain http only to this machine unless
 * `allowInsecureHttp`) and checks the `auth` reference's form; throws UsageError (exit 2) otherwise.
 */
export function parsePushgatewayUrl(
  text: string,
  options: Pick<PushOptions, 'auth' | 'allowInsecureHttp'> = {},
): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch (error) {
    // The text itself is not echoed: it may carry credentials.
    throw new UsageError('--pushgateway is not a URL (expected e.g. http://pushgateway:9091)', {
      cause: error,
    });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new UsageError('--pushgateway must be an http:// or https:// URL');
  }
  const host = options.allowInsecureHttp === true ? undefined : insecureHttpHost(url);
  if (host !== undefined) {
    throw new UsageError(
      `--pushgateway uses plain http:// to ${JSON.stringify(host)}, which is not this machine, so its credentials and the metrics would cross the network in clear; use https://, or add --pushgateway-allow-insecure-http to accept that`,
    );
  }
  if (options.auth !== undefined) {
    // The value is not echoed: someone may have pasted the password itself.
    if (!SecretRef.safeParse(options.auth).success)
      throw new UsageError(
        '--pushgateway-auth must be a reference like env:NAME or file:/absolute/path, never the credentials themselves',
      );
    if (url.username !== '' || url.password !== '')
      throw new UsageError(
        '--pushgateway carries credentials and --pushgateway-auth names others; give one of the two',
      );
  }
  return url;
}

/**
 * The URL path of a grouping key. A label value that is empty or holds a "/" cannot be a path
 * segment; the Pushgateway's `label@base64/<base64url>` form carries it instead.
 */
export function groupingPath(jobName: string, groupings: Readonly<Record<string, string>> = {}): string {
  const segment = (name: string, value: string): string =>
    value === '' || value.includes('/')
      ? `/${name}@base64/${Buffer.from(value).toString('base64url') || '='}`
      : `/${name}/${encodeURIComponent(value)}`;
  return [
    segment('job', jobName),
    ...Object.entries(groupings).map(([name, value]) => segment(name, value)),
  ].join('');
}

/**
 * Replaces the metrics of `jobName` (and `groupings`) on the Pushgateway at `gatewayUrl` with the
 * registry's current values (HTTP PUT). Throws MetricsPushError; the caller decides what a
 * failed push means (for `run` and `rotate`: a warning, never a different exit code).
 */
export async function pushMetrics(
  gatewayUrl: string,
  jobName: string,
  registry: Registry,
  options: PushOptions = {},
): Promise<void> {
  const url = parsePushgatewayUrl(gatewayUrl, options);
  const headers: Record<string, string> = { 'content-type': registry.contentType };
  if (options.auth !== undefined)
    headers.authorization = await authorizationFromRef(url.origin, options.auth);
  // Credentials in the URL become a header; the target and every message carry the origin only.
  if (url.username !== '' || url.password !== '') {
    const user = decodeURIComponent(url.username);
    const password = decodeURIComponent(url.password);
    headers.authorization = `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  }
  const base = url.pathname.replace(/\/+$/, '');
  const target = `${url.origin}${base}/metrics${groupingPath(jobName, options.groupings)}`;
  const timeoutMs = options.timeoutMs ?? DEFAULT_PUSH_TIMEOUT_MS;
  const body = await registry.metrics();
  let statusCode: number;
  try {
    const response = await request(target, {
      method: 'PUT',
      headers,
      body,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      // The whole push, answer included, within timeoutMs: the two timeouts above restart with
      // every byte, and a gateway (or a proxy) dripping its answer would hold the run's exit.
      signal: AbortSignal.timeout(timeoutMs),
      ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
    });
    statusCode = response.statusCode;
    // Drains at most 128 KiB (undici's dump limit) before closing: the answer is never read.
    await discardBody(response.body);
  } catch (error) {
    throw new MetricsPushError(
      url.origin,
      `the Pushgateway at ${url.origin} could not be reached (${errorCode(error)}: ${errorMessage(error)})`,
      { cause: error },
    );
  }
  if (statusCode < 200 || statusCode >= 300) {
    // The answer body is not quoted: a proxy in front of the gateway may echo the request.
    throw new MetricsPushError(url.origin, `the Pushgateway at ${url.origin} answered ${statusCode}`, {
      status: statusCode,
    });
  }
}

/** The Authorization header for a `--pushgateway-auth` reference; a RefError becomes a failed push. */
async function authorizationFromRef(origin: string, ref: string): Promise<string> {
  let value: string;
  try {
    value = (await resolveRef(ref)).reveal();
  } catch (error) {
    throw new MetricsPushError(
      origin,
      `the Pushgateway credentials could not be read (${errorMessage(error)})`,
      { cause: error },
    );
  }
  return /^(?:Basic|Bearer) \S/.test(value)
    ? value
    : `Basic ${Buffer.from(value, 'utf8').toString('base64')}`;
}
