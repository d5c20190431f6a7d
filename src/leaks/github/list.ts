// GET /orgs/{org}/secret-scanning/alerts, /repos/{owner}/{repo}/... and /enterprises/{e}/...:
// the open alerts of the policy's secret types, 100 a page, page after page by the Link header's
// rel="next" (cursor pagination: the first request sends an empty `after`, GitHub's next links
// carry the cursor). Each page is asked with If-None-Match and the ETag of its last answer: a
// 304 costs no request of the rate limit, and the page's alerts are the ones remembered.
//
// `hide_secret=true`: the list is for finding alerts, never their values. Only the single-alert
// fetch of the webhook path reads a secret (its body handled as client.ts says); a server that
// ignores the parameter still has any `secret` wrapped and dropped before anything else looks.
import { z } from 'zod';
import { registerSecretValue } from '../../audit/public/sanitize.ts';
import { ScannerApiError } from '../errors.ts';
import { apiBase, callGithub, statusError, type GithubClientOptions } from './client.ts';
import type { GithubAlertRef } from './payload.ts';

/** 100 alerts with their metadata are some 300 KB; a page past this is not one. */
const MAX_PAGE_BYTES = 4 * 1024 * 1024;
/** A list longer than this many pages is cut (and says so): 10,000 open alerts of keyroll's types is not a state to page through every interval. */
export const MAX_PAGES = 100;

export type ListScope =
  | { kind: 'organization'; org: string }
  | { kind: 'repository'; owner: string; repo: string }
  | { kind: 'enterprise'; enterprise: string };

/** One open alert as the list names it. */
export interface ListedAlert {
  ref: GithubAlertRef;
  /** `owner/repo#42`, as the webhook path names it. */
  name: string;
  secretType?: string;
  htmlUrl?: string;
}

/** What the last 200 answer of a page said, kept for its conditional request. */
export interface CachedPage {
  etag: string;
  alerts: ListedAlert[];
  next: string | undefined;
}

/** Page URL -> its last answer; lives as long as the daemon (a 304 means "what you had"). */
export type PageCache = Map<string, CachedPage>;

const ListedItem = z.looseObject({
  number: z.number().int().positive(),
  state: z.string(),
  secret_type: z.string().optional(),
  html_url: z.string().optional(),
  repository: z
    .looseObject({
      name: z.string().min(1),
      full_name: z.string().min(1),
      owner: z.looseObject({ login: z.string().min(1) }),
    })
    .optional(),
});

export type PageStep = {
  kind: 'page';
  alerts: ListedAlert[];
  next: string | undefined;
  notModified: boolean;
};

export function scopeName(scope: ListScope): string {
  return scope.kind === 'organization'
    ? `org ${scope.org}`
    : scope.kind === 'repository'
      ? `repo ${scope.owner}/${scope.repo}`
      : `enterprise ${scope.enterprise}`;
}

/** The first page's URL of `scope`, filtered to open alerts of `secretTypes`. */
export function firstPageUrl(apiUrl: string, scope: ListScope, secretTypes: readonly string[]): string {
  const path =
    scope.kind === 'organization'
      ? `/orgs/${encodeURIComponent(scope.org)}`
      : scope.kind === 'repository'
        ? `/repos/${encodeURIComponent(scope.owner)}/${encodeURIComponent(scope.repo)}`
        : `/enterprises/${encodeURIComponent(scope.enterprise)}`;
  const query = new URLSearchParams({
    state: 'open',
    secret_type: secretTypes.join(','),
    per_page: '100',
    hide_secret: 'true',
    after: '',
  });
  return `${apiBase(apiUrl)}${path}/secret-scanning/alerts?${query.toString()}`;
}

/** One page, conditionally. Throws ScannerApiError on any answer but 200 and 304. */
export async function listPage(
  options: GithubClientOptions,
  scope: ListScope,
  url: string,
  cache: PageCache,
): Promise<PageStep> {
  const operation = 'list-alerts';
  const cached = cache.get(url);
  const answer = await callGithub(operation, url, options, 'GET', {
    maxBytes: MAX_PAGE_BYTES,
    ...(cached ? { headers: { 'if-none-match': cached.etag } } : {}),
  });
  if (answer.status === 304 && cached)
    return { kind: 'page', alerts: cached.alerts, next: cached.next, notModified: true };
  if (answer.status !== 200) throw statusError(operation, answer.status);
  let json: unknown;
  try {
    json = JSON.parse(answer.text);
  } catch {
    throw new ScannerApiError(
      'KR_GITHUB_BAD_ANSWER',
      operation,
      'GitHub answered list-alerts with a body that is not JSON',
      { status: answer.status },
    );
  }
  if (!Array.isArray(json))
    throw new ScannerApiError(
      'KR_GITHUB_BAD_ANSWER',
      operation,
      "GitHub's list-alerts answer is not a list",
      { status: answer.status },
    );
  const alerts: ListedAlert[] = [];
  for (const item of json as unknown[]) {
    dropSecret(item);
    const parsed = ListedItem.safeParse(item);
    if (!parsed.success) {
      const paths = parsed.error.issues.map((issue) => issue.path.join('.') || '(root)').join(', ');
      throw new ScannerApiError(
        'KR_GITHUB_BAD_ANSWER',
        operation,
        `an alert in GitHub's list-alerts answer does not have the alert shape (fields: ${paths})`,
        { status: answer.status },
      );
    }
    const listed = toListed(scope, parsed.data);
    if (listed !== undefined && parsed.data.state === 'open') alerts.push(listed);
  }
  const next = nextLink(answer.headers.link, options.apiUrl);
  const etag = single(answer.headers.etag);
  if (etag !== undefined) cache.set(url, { etag, alerts, next });
  else cache.delete(url);
  return { kind: 'page', alerts, next, notModified: false };
}

function toListed(scope: ListScope, item: z.infer<typeof ListedItem>): ListedAlert | undefined {
  // The repository endpoint's items name no repository: it is the scope's.
  const owner = scope.kind === 'repository' ? scope.owner : item.repository?.owner.login;
  const repo = scope.kind === 'repository' ? scope.repo : item.repository?.name;
  if (owner === undefined || repo === undefined) return undefined;
  const fullName =
    scope.kind === 'repository' ? `${owner}/${repo}` : (item.repository?.full_name ?? `${owner}/${repo}`);
  return {
    ref: { owner, repo, number: item.number },
    name: `${fullName}#${item.number}`,
    ...(item.secret_type === undefined ? {} : { secretType: item.secret_type }),
    ...(item.html_url === undefined ? {} : { htmlUrl: item.html_url }),
  };
}

/** A server that ignored hide_secret: the value is registered with the sanitizer and removed before parsing. */
function dropSecret(item: unknown): void {
  if (typeof item !== 'object' || item === null || !('secret' in item)) return;
  const value = (item as { secret?: unknown }).secret;
  if (typeof value === 'string' && value !== '') registerSecretValue(value);
  Reflect.deleteProperty(item, 'secret');
}

/**
 * rel="next" of a Link header, only when it points below the configured API base: the token goes
 * with the request, and a Link header is GitHub's (or a proxy's) word, not the policy's.
 */
export function nextLink(header: string | string[] | undefined, apiUrl: string): string | undefined {
  const text = Array.isArray(header) ? header.join(', ') : header;
  if (text === undefined) return undefined;
  for (const part of text.split(',')) {
    const match = /<([^>]+)>\s*;\s*rel="?next"?/.exec(part.trim());
    if (match?.[1] === undefined) continue;
    const base = new URL(`${apiBase(apiUrl)}/`);
    let next: URL;
    try {
      next = new URL(match[1]);
    } catch {
      return undefined;
    }
    if (next.origin !== base.origin || !next.pathname.startsWith(base.pathname)) {
      throw new ScannerApiError(
        'KR_GITHUB_BAD_ANSWER',
        'list-alerts',
        "GitHub's next-page link points outside intake.github.apiUrl; the token is not sent there",
      );
    }
    return next.toString();
  }
  return undefined;
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
