// The two REST calls of the GitHub flow, over undici's public API: read the alert (its `secret`
// is the leaked value) and resolve it as revoked. The alert answer holds the secret, so its body
// is never put into an error, and the value is wrapped in Secret the moment it is parsed (the
// sanitizer blanks it from every output from then on; invariant 3).
import { request, type Dispatcher } from 'undici';
import { Secret } from '../../audit/secret.ts';
import { readBodyPrefix } from '../../http/body.ts';
import { ScannerApiError } from '../errors.ts';
import { GithubAlert, type GithubAlertRef } from './payload.ts';

/** An alert answer is a few KiB; anything past this is not one. */
const MAX_ALERT_BYTES = 256 * 1024;
const TIMEOUT_MS = 10_000;
const API_VERSION = '2022-11-28';

export interface GithubClientOptions {
  apiUrl: string;
  token: Secret;
  dispatcher?: Dispatcher;
}

export interface FetchedAlert {
  state: GithubAlert['state'];
  secret: Secret | undefined;
  secretType?: string;
  htmlUrl?: string;
}

function alertUrl(apiUrl: string, ref: GithubAlertRef): string {
  const base = apiUrl.replace(/\/+$/, '');
  return `${base}/repos/${encodeURIComponent(ref.owner)}/${encodeURIComponent(ref.repo)}/secret-scanning/alerts/${ref.number}`;
}

function headers(token: Secret): Record<string, string> {
  return {
    accept: 'application/vnd.github+json',
    authorization: `Bearer ${token.reveal()}`,
    'x-github-api-version': API_VERSION,
    'user-agent': 'keyroll',
  };
}

async function call(operation: string, url: string, options: GithubClientOptions, method: 'GET' | 'PATCH', body?: string): Promise<{ status: number; text: string }> {
  let response;
  try {
    response = await request(url, {
      method,
      headers: { ...headers(options.token), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body }),
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
      ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
    });
  } catch (error) {
    throw new ScannerApiError('KR_GITHUB_UNREACHABLE', operation, `GitHub did not answer ${operation}: ${(error as { code?: string }).code ?? 'network error'}`, { cause: error, retryable: true });
  }
  const prefix = await readBodyPrefix(response.body, MAX_ALERT_BYTES).catch((error: unknown) => {
    throw new ScannerApiError('KR_GITHUB_UNREACHABLE', operation, `GitHub's answer to ${operation} broke off`, { cause: error, status: response.statusCode, retryable: true });
  });
  if (prefix.truncated) throw new ScannerApiError('KR_GITHUB_BAD_ANSWER', operation, `GitHub's answer to ${operation} is larger than ${MAX_ALERT_BYTES} bytes`, { status: response.statusCode });
  return { status: response.statusCode, text: prefix.text };
}

function statusError(operation: string, status: number): ScannerApiError {
  const hint =
    status === 401
      ? 'the token (intake.github.token) is missing, invalid or expired'
      : status === 403 || status === 404
        ? 'the token may not read or resolve secret scanning alerts of this repository (fine-grained: "Secret scanning alerts" read and write), or secret scanning is off'
        : status === 422
          ? 'GitHub refused the change'
          : status >= 500 || status === 429
            ? 'GitHub is unavailable or rate limiting'
            : 'unexpected answer';
  return new ScannerApiError(`KR_GITHUB_${status >= 500 || status === 429 ? 'UNAVAILABLE' : 'REFUSED'}`, operation, `GitHub answered ${status} to ${operation}: ${hint}`, { status, retryable: status >= 500 || status === 429 });
}

/** GET /repos/{owner}/{repo}/secret-scanning/alerts/{alert_number}. */
export async function fetchGithubAlert(options: GithubClientOptions, ref: GithubAlertRef): Promise<FetchedAlert> {
  const operation = 'get-alert';
  const { status, text } = await call(operation, alertUrl(options.apiUrl, ref), options, 'GET');
  if (status !== 200) throw statusError(operation, status);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ScannerApiError('KR_GITHUB_BAD_ANSWER', operation, 'GitHub answered get-alert with a body that is not JSON', { status });
  }
  // Wrapped before anything else looks at the answer: from here on no output can carry it.
  const rawSecret = typeof json === 'object' && json !== null && 'secret' in json && typeof json.secret === 'string' && json.secret !== '' ? new Secret(json.secret) : undefined;
  const parsed = GithubAlert.safeParse(json);
  if (!parsed.success) {
    const paths = parsed.error.issues.map((issue) => issue.path.join('.') || '(root)').join(', ');
    throw new ScannerApiError('KR_GITHUB_BAD_ANSWER', operation, `GitHub's alert answer does not have the alert shape (fields: ${paths})`, { status });
  }
  const alert = parsed.data;
  return {
    state: alert.state,
    secret: rawSecret,
    ...(alert.secret_type === undefined ? {} : { secretType: alert.secret_type }),
    ...(alert.html_url === undefined ? {} : { htmlUrl: alert.html_url }),
  };
}

/** PATCH the alert to state resolved, resolution revoked, with a comment naming the rotation. */
export async function resolveGithubAlert(options: GithubClientOptions, ref: GithubAlertRef, comment: string): Promise<void> {
  const operation = 'resolve-alert';
  const body = JSON.stringify({ state: 'resolved', resolution: 'revoked', resolution_comment: comment });
  const { status } = await call(operation, alertUrl(options.apiUrl, ref), options, 'PATCH', body);
  if (status !== 200) throw statusError(operation, status);
}
