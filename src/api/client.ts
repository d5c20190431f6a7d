// The typed client for the four operations of docs/api.md. One undici Agent per
// client keeps connections alive between calls; every answer is validated (decode.ts) and every
// failure is one ApiError. The spec does not state HTTP methods: POST for the roll, GET for the
// list, PATCH for the updates, each overridable because a real deployment may differ.
import { Agent, type Dispatcher } from 'undici';
import type { Secret } from '../audit/public/secret.ts';
import { staticCredential, type CredentialProvider } from './credentials.ts';
import { decodeBody, decodeRolledKey, type RawResponse, type RolledKey } from './decode.ts';
import { ApiError, transportError, type ApiOperation } from './errors.ts';
import {
  headerValue,
  mediaType,
  readBodyText,
  ResponseDeadlineError,
  ResponseTooLargeError,
} from './http.ts';
import type { RateLimiter } from './rate-limiter.ts';
import { parseRetryAfter } from './retry-after.ts';
import {
  ConsentSettingsBody,
  ProjectBody,
  ProjectListBody,
  type Branding,
  type ConsentSettings,
  type Project,
} from './schema.ts';

export type { ApiOperation } from './errors.ts';
export type { RolledKey } from './decode.ts';

// DELETE is accepted too: the policy schema offers it, and some APIs model a roll as deleting the old secret.
export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export const DEFAULT_METHODS: Readonly<Record<ApiOperation, HttpMethod>> = {
  roll: 'POST',
  listProjects: 'GET',
  updateProject: 'PATCH',
  updateConsent: 'PATCH',
};

export interface ApiClientOptions {
  /** Base address without the /v1 prefix, e.g. https://api.example.com (a path prefix is kept). */
  baseUrl: string;
  credentials: CredentialProvider;
  /** For tests (MockAgent) or shared pools; the client then neither creates nor closes one. */
  dispatcher?: Dispatcher;
  methods?: Partial<Record<ApiOperation, HttpMethod>>;
  headersTimeoutMs?: number;
  bodyTimeoutMs?: number;
  /** Shared by every client of the same API credential so a 429 slows all of them. */
  limiter?: RateLimiter;
  userAgent?: string;
  now?: () => number;
}

export interface ProjectPage {
  projects: Project[];
  nextCursor: string | null;
  hasMore: boolean;
}

interface CallSpec {
  operation: ApiOperation;
  path: string;
  query?: Record<string, string | number | undefined>;
  body?: unknown;
  credentials?: CredentialProvider;
  signal?: AbortSignal | undefined;
}

const DEFAULT_TIMEOUT_MS = 10_000;
/** The longest a 429 pauses every caller: the run's default 429 budget (src/rotation/runtime.ts). */
export const MAX_SHARED_PAUSE_MS = 120_000;

export class ApiClient {
  readonly #origin: string;
  readonly #pathPrefix: string;
  readonly #credentials: CredentialProvider;
  readonly #dispatcher: Dispatcher;
  readonly #ownAgent: Agent | undefined;
  readonly #methods: Record<ApiOperation, HttpMethod>;
  readonly #headersTimeoutMs: number;
  readonly #bodyTimeoutMs: number;
  readonly #limiter: RateLimiter | undefined;
  readonly #userAgent: string;
  readonly #now: () => number;

  constructor(options: ApiClientOptions) {
    const base = new URL(options.baseUrl);
    if (base.protocol !== 'https:' && base.protocol !== 'http:') {
      throw new TypeError(`API base URL must be http(s), got ${base.protocol}`);
    }
    this.#origin = base.origin;
    this.#pathPrefix = base.pathname.replace(/\/+$/, '');
    this.#credentials = options.credentials;
    this.#headersTimeoutMs = options.headersTimeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#bodyTimeoutMs = options.bodyTimeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (options.dispatcher === undefined) {
      this.#ownAgent = new Agent({
        headersTimeout: this.#headersTimeoutMs,
        bodyTimeout: this.#bodyTimeoutMs,
      });
      this.#dispatcher = this.#ownAgent;
    } else {
      this.#ownAgent = undefined;
      this.#dispatcher = options.dispatcher;
    }
    this.#methods = { ...DEFAULT_METHODS, ...options.methods };
    this.#limiter = options.limiter;
    this.#userAgent = options.userAgent ?? 'keyroll';
    this.#now = options.now ?? Date.now;
  }

  /** Rolls the key: the API returns the new secret once and the old one dies at that instant. */
  async rollKey(
    keyId: string,
    options: { organizationId?: string; signal?: AbortSignal } = {},
  ): Promise<RolledKey> {
    const response = await this.#call({
      operation: 'roll',
      path: `/v1/auth/keys/${pathSegment(keyId, 'keyId')}/roll`,
      query: { organizationId: options.organizationId },
      signal: options.signal,
    });
    return decodeRolledKey(response, keyId, this.#now());
  }

  async listProjects(
    query: { limit: number; organizationId?: string; cursor?: string },
    options: { credentials?: CredentialProvider; signal?: AbortSignal } = {},
  ): Promise<ProjectPage> {
    const response = await this.#call({
      operation: 'listProjects',
      path: '/v1/projects',
      query: { organizationId: query.organizationId, limit: query.limit, cursor: query.cursor },
      credentials: options.credentials,
      signal: options.signal,
    });
    const body = decodeBody('listProjects', response, ProjectListBody, this.#now());
    return { projects: body.data, nextCursor: body.pagination.nextCursor, hasMore: body.pagination.hasMore };
  }

  /** Every project, page after page, following `pagination.nextCursor` until `hasMore` is false. */
  async *projects(
    query: { limit?: number; organizationId?: string } = {},
    options: { signal?: AbortSignal } = {},
  ): AsyncIterable<Project> {
    const seen = new Set<string>();
    let cursor: string | undefined;
    for (;;) {
      const page = await this.listProjects(
        { limit: query.limit ?? 100, organizationId: query.organizationId, cursor },
        options,
      );
      yield* page.projects;
      if (!page.hasMore) return;
      // A missing or repeated cursor would loop forever; the answer is broken, so say so.
      if (page.nextCursor === null || seen.has(page.nextCursor)) {
        throw new ApiError({
          code: 'KR_API_MALFORMED_RESPONSE',
          operation: 'listProjects',
          status: 200,
          message: `listProjects: hasMore is true but the next cursor is ${page.nextCursor === null ? 'null' : 'one already followed'}`,
        });
      }
      seen.add(page.nextCursor);
      cursor = page.nextCursor;
    }
  }

  async updateProject(
    projectId: string,
    body: { projectName?: string; description?: string | null },
    options: { signal?: AbortSignal } = {},
  ): Promise<Project> {
    const response = await this.#call({
      operation: 'updateProject',
      path: `/v1/projects/${pathSegment(projectId, 'projectId')}`,
      body,
      signal: options.signal,
    });
    return decodeBody('updateProject', response, ProjectBody, this.#now()).data;
  }

  async updateConsent(
    projectId: string,
    body: { trustedOrigins?: string[]; branding?: Branding },
    options: { signal?: AbortSignal } = {},
  ): Promise<ConsentSettings> {
    const response = await this.#call({
      operation: 'updateConsent',
      path: `/v1/projects/${pathSegment(projectId, 'projectId')}/consent`,
      body,
      signal: options.signal,
    });
    return decodeBody('updateConsent', response, ConsentSettingsBody, this.#now()).data;
  }

  /**
   * Probes whether `secret` (an organization API key) works: a one-item project list with it as
   * the bearer. 'invalid' on 401; any other failure throws, since it says nothing about the key.
   */
  async probeSecret(
    secret: Secret,
    options: { organizationId?: string; signal?: AbortSignal } = {},
  ): Promise<'valid' | 'invalid'> {
    try {
      await this.listProjects(
        { limit: 1, organizationId: options.organizationId },
        { credentials: staticCredential(secret, 'secret under probe'), signal: options.signal },
      );
      return 'valid';
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) return 'invalid';
      throw error;
    }
  }

  /** Closes the client's own connection pool; an injected dispatcher is left to its owner. */
  async close(): Promise<void> {
    await this.#ownAgent?.close();
  }

  async #call(spec: CallSpec): Promise<RawResponse> {
    const credentials = spec.credentials ?? this.#credentials;
    const first = await this.#send(spec, credentials);
    // A 401 means the request was refused before anything happened (not even a roll), so one
    // retry with a fresh token is safe; it covers an OAuth token revoked before its expiry.
    if (first.status === 401 && credentials.invalidate !== undefined) {
      credentials.invalidate();
      return this.#send(spec, credentials);
    }
    return first;
  }

  async #send(spec: CallSpec, credentials: CredentialProvider): Promise<RawResponse> {
    const { operation } = spec;
    // The limiter paces keyroll's own credential. A call with another credential (the probe of a
    // rolled key) counts against that key's own limit, so it neither waits for keyroll's budget
    // nor spends it: with verify.apiCall on, it halved a leak rotation's pace (bench/emergency.ts).
    const limiter = spec.credentials === undefined ? this.#limiter : undefined;
    try {
      await limiter?.acquire(spec.signal);
    } catch (error) {
      // Aborted while waiting for a slot: nothing was sent, so the outcome is known.
      throw new ApiError({
        code: 'KR_API_ABORTED',
        operation,
        message: `${operation}: aborted while waiting for the rate limiter`,
        cause: error,
      });
    }
    // Read after the wait, so a file credential rotated meanwhile is the one sent.
    let token: Secret;
    try {
      token = await credentials.token();
    } catch (error) {
      // RefError and CredentialError name the reference or token URL, never the value.
      throw new ApiError({
        code: 'KR_API_CREDENTIAL_UNAVAILABLE',
        operation,
        message: `${operation}: cannot obtain the API credential (${credentials.description})`,
        cause: error,
      });
    }

    const headers: Record<string, string> = {
      authorization: `Bearer ${token.reveal()}`,
      accept: 'application/json',
      'user-agent': this.#userAgent,
    };
    if (spec.body !== undefined) headers['content-type'] = 'application/json';

    let phase: 'headers' | 'body' = 'headers';
    let response: RawResponse;
    try {
      const answer = await this.#dispatcher.request({
        origin: this.#origin,
        path: this.#pathPrefix + spec.path + queryString(spec.query),
        method: this.#methods[operation],
        headers,
        body: spec.body === undefined ? null : JSON.stringify(spec.body),
        headersTimeout: this.#headersTimeoutMs,
        bodyTimeout: this.#bodyTimeoutMs,
        signal: spec.signal ?? null,
      });
      phase = 'body';
      // timeouts.bodyMs bounds the whole body, not only the gap between chunks (a slow drip).
      const { text, bytes } = await readBodyText(answer.body, undefined, this.#bodyTimeoutMs);
      response = {
        status: answer.statusCode,
        headers: answer.headers,
        contentType: mediaType(answer.headers),
        text,
        bytes,
      };
    } catch (error) {
      if (error instanceof ResponseTooLargeError) {
        throw new ApiError({
          code: 'KR_API_MALFORMED_RESPONSE',
          operation,
          message: `${operation}: response body larger than ${error.limit} bytes`,
          outcomeUnknown: operation === 'roll',
        });
      }
      if (error instanceof ResponseDeadlineError) {
        throw new ApiError({
          code: 'KR_API_TIMEOUT',
          operation,
          message: `${operation}: response body not complete within ${error.deadlineMs} ms`,
          outcomeUnknown: operation === 'roll',
          cause: error,
        });
      }
      throw transportError(error, operation, phase);
    }

    if (response.status === 429) {
      const retryAfterMs = parseRetryAfter(headerValue(response.headers, 'retry-after'), this.#now());
      // Every caller sharing the limiter waits, not only this one (the limit is per credential),
      // but never longer than a run's whole 429 budget: a hostile or broken `Retry-After: 99999`
      // would otherwise stall every other key of the run for a day.
      if (retryAfterMs !== undefined) limiter?.pauseFor(Math.min(retryAfterMs, MAX_SHARED_PAUSE_MS));
    }
    return response;
  }
}

function pathSegment(value: string, name: string): string {
  if (value === '') throw new TypeError(`${name} must not be empty`);
  return encodeURIComponent(value);
}

function queryString(query: Record<string, string | number | undefined> | undefined): string {
  if (query === undefined) return '';
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value !== undefined) params.set(name, String(value));
  }
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}
