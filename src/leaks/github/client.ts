// The REST calls of the GitHub flow, over undici's public API: read the alert (its `secret` is
// the leaked value), resolve it as revoked, and list open alerts for the reconcile (list.ts).
// The alert answer holds the secret, so its body is never put into an error, and the value is
// wrapped in Secret the moment it is parsed (the sanitizer blanks it from every output from then
// on; invariant 3). Every answer's status and headers go to `observe` (the rate budget, rate.ts).
import { request, type Dispatcher } from 'undici';
import { Secret } from '../../audit/public/secret.ts';
import { readBodyPrefix } from '../../http/public/body.ts';
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
  /** Sees every answer's status and headers (X-RateLimit-*, Retry-After), the webhook path's too. */
  observe?: (answer: GithubAnswerMeta) => void;
}

export interface GithubAnswerMeta {
  status: number;
  headers: Record<string, string | string[] | undefined>;
}

export interface GithubAnswer extends GithubAnswerMeta {
  text: string;
}

export interface FetchedAlert {
  state: GithubAlert['state'];
  secret: Secret | undefined;
  secretType?: string;
  htmlUrl?: string;
}

export function apiBase(apiUrl: string): string {
  return apiUrl.replace(/\/+$/, '');
}

function alertUrl(apiUrl: string, ref: GithubAlertRef): string {
  const base = apiBase(apiUrl);
  return `${base}/repos/${encodeURIComponent(ref.owner)}/${encodeURIComponent(ref.repo)}/secret-scanning/alerts/${ref.number}`;
}

export function githubHeaders(token: Secret): Record<string, string> {
  return {
    accept: 'application/vnd.github+json',
    authorization: `Bearer ${token.reveal()}`,
    'x-github-api-version': API_VERSION,
    'user-agent': 'keyroll',
  };
}

export async function callGithub(
  operation: string,
  url: string,
  options: GithubClientOptions,
  method: 'GET' | 'PATCH',
  extra: { body?: string; headers?: Record<string, string>; maxBytes?: number } = {},
): Promise<GithubAnswer> {
  const { body } = extra;
  const maxBytes = extra.maxBytes ?? MAX_ALERT_BYTES;
  let response;
  try {
    response = await request(url, {
      method,
      headers: {
        ...githubHeaders(options.token),
        ...extra.headers,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body }),
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
      ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
    });
  } catch (error) {
    throw new ScannerApiError(
      'KR_GITHUB_UNREACHABLE',
      operation,
      `GitHub did not answer ${operation}: ${(error as { code?: string }).code ?? 'network error'}`,
      { cause: error, retryable: true },
    );
  }
  options.observe?.({ status: response.statusCode, headers: response.headers });
  const prefix = await readBodyPrefix(response.body, maxBytes).catch((error: unknown) => {
    throw new ScannerApiError(
      'KR_GITHUB_UNREACHABLE',
      operation,
      `GitHub's answer to ${operation} broke off`,
      { cause: error, status: response.statusCode, retryable: true },
    );
  });
  if (prefix.truncated)
    throw new ScannerApiError(
      'KR_GITHUB_BAD_ANSWER',
      operation,
      `GitHub's answer to ${operation} is larger than ${maxBytes} bytes`,
      { status: response.statusCode },
    );
  return { status: response.statusCode, headers: response.headers, text: prefix.text };
}

export function statusError(operation: string, status: number): ScannerApiError {
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
  return new ScannerApiError(
    status >= 500 || status === 429 ? 'KR_GITHUB_UNAVAILABLE' : 'KR_GITHUB_REFUSED',
    operation,
    `GitHub answered ${status} to ${operation}: ${hint}`,
    { status, retryable: status >= 500 || status === 429 },
  );
}

/** GET /repos/{owner}/{repo}/secret-scanning/alerts/{alert_number}. */
export async function fetchGithubAlert(
  options: GithubClientOptions,
  ref: GithubAlertRef,
): Promise<FetchedAlert> {
  const operation = 'get-alert';
  const { status, text } = await callGithub(operation, alertUrl(options.apiUrl, ref), options, 'GET');
  if (status !== 200) throw statusError(operation, status);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ScannerApiError(
      'KR_GITHUB_BAD_ANSWER',
      operation,
      'GitHub answered get-alert with a body that is not JSON',
      { status },
    );
  }
  // Wrapped before anything else looks at the answer: from here on no output can carry it.
  const rawSecret =
    typeof json === 'object' &&
    json !== null &&
    'secret' in json &&
    typeof json.secret === 'string' &&
    json.secret !== ''
      ? new Secret(json.secret)
      : undefined;
  const parsed = GithubAlert.safeParse(json);
  if (!parsed.success) {
    const paths = parsed.error.issues.map((issue) => issue.path.join('.') || '(root)').join(', ');
    throw new ScannerApiError(
      'KR_GITHUB_BAD_ANSWER',
      operation,
      `GitHub's alert answer does not have the alert shape (fields: ${paths})`,
      { status },
    );
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
export async function resolveGithubAlert(
  options: GithubClientOptions,
  ref: GithubAlertRef,
  comment: string,
): Promise<void> {
  const operation = 'resolve-alert';
  const body = JSON.stringify({ state: 'resolved', resolution: 'revoked', resolution_comment: comment });
  const { status } = await callGithub(operation, alertUrl(options.apiUrl, ref), options, 'PATCH', { body });
  if (status !== 200) throw statusError(operation, status);
}
