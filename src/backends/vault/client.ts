// A narrow, typed HTTP client for the Vault / OpenBao API over undici (the `@hashicorp/vault-client`
// package is not published on npm). It sends the token and namespace headers, enforces the
// configured timeout (for the whole call, body included), trusts an extra CA file, reads no
// answer past MAX_VAULT_ANSWER_BYTES, validates answers with zod and turns every failure into a
// BackendError. It never puts a request body, a response body or a token into
// an error: Vault's own error strings are short fixed texts, and they are sanitized anyway.
// A 429 from a rate-limit quota (`sys/quotas/rate-limit`) is waited out, not failed (invariant 11):
// the server's Retry-After where it sends one (`enable_rate_limit_response_headers`), else a
// jittered backoff, within `quotas.maxWaitMs`, counted (src/backends/quota/). The write of a
// rotation (operation `write`, after the roll) is not held here: its 429 goes back to the store
// step at once, which retries it with its own backoff and audits the retry after the store
// (invariant 2: nothing but the write between the roll answer and the write).
import { readFile } from 'node:fs/promises';
import { Agent, request, type Dispatcher } from 'undici';
import { readBodyPrefix } from '../../http/public/body.ts';
import { headerValue } from '../../api/public/http.ts';
import { parseRetryAfter } from '../../api/public/retry-after.ts';
import { VAULT_QUOTA_GROUP } from '../quota/groups.ts';
import type { QuotaObserver } from '../quota/observer.ts';
import { retryThrottled } from '../quota/throttle.ts';
import type { z } from 'zod';
import type { Secret } from '../../audit/public/secret.ts';
import { truncateSanitized } from '../../audit/public/sanitize.ts';
import {
  BackendError,
  codeForHttpStatus,
  codeForTransportError,
  describeCode,
  type BackendOperation,
} from '../errors.ts';
import { VaultErrorBody } from './schema.ts';

/**
 * The most of one answer the client reads. A KV v2 read is a few KiB (a secret, its metadata, at
 * most a few hundred versions listed); anything past this is not Vault talking, and an error body
 * was read unbounded before (issue 12, section 2). The stream is cut here, never buffered first.
 */
export const MAX_VAULT_ANSWER_BYTES = 1024 * 1024;

export interface VaultClientOptions {
  /** The policy's name for the backend (for errors). */
  backend: string;
  address: string;
  namespace?: string;
  caFile?: string;
  timeoutMs: number;
  dispatcher?: Dispatcher;
  /** The longest one call waits out the server's rate-limit quota (429) before it fails; default 60 s. */
  quotaWaitMs?: number;
  quotaObserver?: QuotaObserver;
}

export type VaultMethod = 'GET' | 'POST' | 'PUT' | 'DELETE';

export interface VaultCall {
  method: VaultMethod;
  /** API path after `/v1/`, already encoded. */
  apiPath: string;
  body?: unknown;
  /** Omitted for logins. */
  token?: Secret;
  /** For errors: what keyroll was doing and on which target. */
  operation: BackendOperation;
  target: string;
}

export interface VaultAnswer {
  status: number;
  /** Parsed JSON, or undefined for an empty body (204). */
  body: unknown;
  /** A 429's Retry-After, in ms. */
  retryAfterMs?: number;
}

/** The longest one call waits out a rate-limit quota by default (VaultBackendConfig.quotas). */
export const DEFAULT_VAULT_QUOTA_WAIT_MS = 60_000;

/** A 429 answer, thrown only inside send() so the throttle loop can wait it out. */
class RateLimitedAnswer extends Error {
  readonly answer: VaultAnswer;
  constructor(answer: VaultAnswer) {
    super('rate limited');
    this.answer = answer;
  }
}

export class VaultClient {
  readonly #options: VaultClientOptions;
  readonly #baseUrl: string;
  #dispatcher: Promise<Dispatcher | undefined> | undefined;
  #ownAgent: Agent | undefined;

  constructor(options: VaultClientOptions) {
    this.#options = options;
    this.#baseUrl = options.address.replace(/\/+$/, '');
  }

  /**
   * Sends a call; any HTTP status comes back as is (a 429 once its wait is spent), transport
   * failures throw a BackendError.
   */
  async send(call: VaultCall): Promise<VaultAnswer> {
    const observer = this.#options.quotaObserver;
    const event = {
      backend: this.#options.backend,
      kind: 'vault' as const,
      group: VAULT_QUOTA_GROUP,
      operation: call.operation,
      path: call.target,
    };
    if (call.operation === 'write') {
      // After the roll: no wait here (see the top of this file); counted only, no I/O.
      const answer = await this.#sendOnce(call);
      if (answer.status === 429)
        observer?.throttled?.({
          ...event,
          attempt: 1,
          waitMs: 0,
          afterRoll: true,
          ...(answer.retryAfterMs === undefined ? {} : { retryAfterMs: answer.retryAfterMs }),
        });
      return answer;
    }
    try {
      return await retryThrottled(
        async () => {
          const answer = await this.#sendOnce(call);
          if (answer.status === 429) throw new RateLimitedAnswer(answer);
          return answer;
        },
        {
          maxWaitMs: this.#options.quotaWaitMs ?? DEFAULT_VAULT_QUOTA_WAIT_MS,
          throttleOf: (error) =>
            error instanceof RateLimitedAnswer ? { retryAfterMs: error.answer.retryAfterMs } : undefined,
          onThrottled: (wait) => observer?.throttled?.({ ...event, ...wait, afterRoll: false }),
        },
      );
    } catch (error) {
      if (error instanceof RateLimitedAnswer) return error.answer;
      throw error;
    }
  }

  async #sendOnce(call: VaultCall): Promise<VaultAnswer> {
    const headers: Record<string, string> = { 'x-vault-request': 'true' };
    if (call.token !== undefined) headers['x-vault-token'] = call.token.reveal();
    if (this.#options.namespace !== undefined) headers['x-vault-namespace'] = this.#options.namespace;
    if (call.body !== undefined) headers['content-type'] = 'application/json';
    const dispatcher = await this.#getDispatcher(call);
    let text: string;
    let truncated: boolean;
    let status: number;
    let retryAfterMs: number | undefined;
    try {
      const response = await request(`${this.#baseUrl}/v1/${call.apiPath}`, {
        method: call.method,
        headers,
        ...(call.body === undefined ? {} : { body: JSON.stringify(call.body) }),
        ...(dispatcher === undefined ? {} : { dispatcher }),
        headersTimeout: this.#options.timeoutMs,
        bodyTimeout: this.#options.timeoutMs,
        signal: AbortSignal.timeout(this.#options.timeoutMs),
      });
      status = response.statusCode;
      if (status === 429)
        retryAfterMs = parseRetryAfter(headerValue(response.headers, 'retry-after'), Date.now());
      ({ text, truncated } = await readBodyPrefix(response.body, MAX_VAULT_ANSWER_BYTES));
    } catch (error) {
      const code = codeForTransportError(error) ?? 'KR_BACKEND_UNAVAILABLE';
      throw this.error(code, call, undefined, error);
    }
    const retry = retryAfterMs === undefined ? {} : { retryAfterMs };
    if (truncated) {
      // An error answer this large says nothing its status does not: keep the status alone.
      if (status < 200 || status >= 300) return { status, body: undefined, ...retry };
      throw this.error(
        'KR_BACKEND_INVALID_RESPONSE',
        call,
        status,
        undefined,
        `the answer is larger than ${String(MAX_VAULT_ANSWER_BYTES)} bytes`,
      );
    }
    if (text.trim() === '') return { status, body: undefined, ...retry };
    try {
      return { status, body: JSON.parse(text) as unknown, ...retry };
    } catch {
      // Not wrapped with cause on purpose: a JSON parse error quotes the text, which may hold a secret.
      throw this.error('KR_BACKEND_INVALID_RESPONSE', call, status);
    }
  }

  /** Sends a call that must answer 2xx and parses the body with `schema`. */
  async json<T>(call: VaultCall, schema: z.ZodType<T>): Promise<T> {
    const answer = await this.send(call);
    if (answer.status < 200 || answer.status >= 300) throw this.httpError(call, answer);
    return this.parse(call, answer, schema);
  }

  /** Sends a call that must answer 2xx and ignores the body. */
  async ok(call: VaultCall): Promise<void> {
    const answer = await this.send(call);
    if (answer.status < 200 || answer.status >= 300) throw this.httpError(call, answer);
  }

  parse<T>(call: VaultCall, answer: VaultAnswer, schema: z.ZodType<T>): T {
    const parsed = schema.safeParse(answer.body);
    // The zod error is dropped on purpose: its issues can quote values from the body.
    if (!parsed.success) throw this.error('KR_BACKEND_INVALID_RESPONSE', call, answer.status);
    return parsed.data;
  }

  /** The BackendError for a non-2xx answer, naming Vault's (sanitized, shortened) error text. */
  httpError(call: VaultCall, answer: VaultAnswer): BackendError {
    return this.error(
      codeForHttpStatus(answer.status),
      call,
      answer.status,
      undefined,
      vaultErrorText(answer.body),
    );
  }

  error(
    code: BackendError['code'],
    call: VaultCall,
    status?: number,
    cause?: unknown,
    detail?: string,
  ): BackendError {
    const statusText = status === undefined ? '' : ` (HTTP ${String(status)})`;
    const detailText = detail === undefined || detail === '' ? '' : `: ${detail}`;
    return new BackendError(
      code,
      `vault backend ${this.#options.backend}: ${call.operation} of ${call.target} failed, ${describeCode(code)}${statusText}${detailText}`,
      {
        backend: this.#options.backend,
        kind: 'vault',
        operation: call.operation,
        path: call.target,
        ...(status === undefined ? {} : { status }),
        ...(cause === undefined ? {} : { cause }),
      },
    );
  }

  async close(): Promise<void> {
    await this.#ownAgent?.close();
  }

  async #getDispatcher(call: VaultCall): Promise<Dispatcher | undefined> {
    this.#dispatcher ??= this.#makeDispatcher();
    try {
      return await this.#dispatcher;
    } catch (error) {
      this.#dispatcher = undefined;
      throw this.error(
        'KR_BACKEND_FAILED',
        call,
        undefined,
        error,
        `cannot read the CA file ${this.#options.caFile ?? ''}`,
      );
    }
  }

  async #makeDispatcher(): Promise<Dispatcher | undefined> {
    if (this.#options.dispatcher !== undefined) return this.#options.dispatcher;
    if (this.#options.caFile === undefined) return undefined;
    const ca = await readFile(this.#options.caFile, 'utf8');
    this.#ownAgent = new Agent({ connect: { ca, timeout: this.#options.timeoutMs } });
    return this.#ownAgent;
  }
}

/** Vault's error strings ("permission denied", "check-and-set parameter did not match ..."), cleaned up. */
export function vaultErrorText(body: unknown): string {
  const parsed = VaultErrorBody.safeParse(body);
  if (!parsed.success || parsed.data.errors === undefined) return '';
  const text = parsed.data.errors
    .map((e) =>
      e
        .replace(/\d+ errors? occurred:\s*/g, '')
        .replace(/\s*\*\s*/g, ' ')
        .trim(),
    )
    .filter((e) => e !== '')
    .join('; ');
  return truncateSanitized(text, 200);
}
