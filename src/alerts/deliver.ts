// One HTTP POST of a JSON body to an alert sink, retried with exponential backoff on network
// errors, 5xx and 429 (honouring Retry-After). A 4xx other than 429 means the request is wrong
// and sending it again cannot help, so it is not retried.
import type { Dispatcher } from 'undici';
import { request } from '../http/undici.ts';
import { parseRetryAfter } from '../api/retry-after.ts';
import { errorCode } from '../errors.ts';
import { AlertDeliveryError } from './errors.ts';
import type { AlertSinkConfig } from './config.ts';

/** What a sink module builds: the request, with the URL and header values already resolved. */
export interface SinkRequest {
  /** Revealed from a reference where it came from one: it goes on the wire and nowhere else. */
  url: string;
  headers: Record<string, string>;
  body: unknown;
  timeoutMs: number;
  /** The URL as it may appear in the audit trail: only a plain policy URL, never one from a reference. */
  auditUrl?: string;
}

export interface RetryPolicy {
  /** Total attempts, the first included. */
  attempts: number;
  initialBackoffMs: number;
  /** Upper bound of one backoff wait, Retry-After included. */
  maxBackoffMs?: number;
}

export const DEFAULT_ALERT_RETRY: Required<RetryPolicy> = { attempts: 3, initialBackoffMs: 1_000, maxBackoffMs: 30_000 };

export interface DeliveryOptions {
  sink: string;
  sinkKind: AlertSinkConfig['kind'];
  retry: RetryPolicy;
  sleep: (ms: number) => Promise<void>;
  now: () => number;
  dispatcher?: Dispatcher;
}

export type DeliveryResult =
  | { delivered: true; attempts: number; status: number }
  | { delivered: false; attempts: number; error: AlertDeliveryError };

const USER_AGENT = 'keyroll-alerts';
const EXCERPT_CHARS = 200;

async function readExcerpt(body: Dispatcher.ResponseData['body']): Promise<string | undefined> {
  try {
    const text = (await body.text()).trim();
    return text === '' ? undefined : text.slice(0, EXCERPT_CHARS);
  } catch {
    return undefined;
  }
}

interface AttemptOutcome {
  result: DeliveryResult | undefined;
  error?: AlertDeliveryError;
  retryAfterMs?: number;
}

async function attemptOnce(req: SinkRequest, options: DeliveryOptions, attempt: number): Promise<AttemptOutcome> {
  const context = { sink: options.sink, sinkKind: options.sinkKind };
  let response: Dispatcher.ResponseData;
  try {
    response = await request(req.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': USER_AGENT, ...req.headers },
      body: JSON.stringify(req.body),
      headersTimeout: req.timeoutMs,
      bodyTimeout: req.timeoutMs,
      ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
    });
  } catch (error) {
    const networkCode = errorCode(error);
    return {
      result: undefined,
      error: new AlertDeliveryError('KR_ALERT_NETWORK', `alert sink ${options.sink} could not be reached (${networkCode})`, { ...context, networkCode, cause: error }),
    };
  }
  const status = response.statusCode;
  if (status >= 200 && status < 300) {
    await response.body.dump();
    return { result: { delivered: true, attempts: attempt, status } };
  }
  const responseExcerpt = await readExcerpt(response.body);
  const excerpt = responseExcerpt === undefined ? {} : { responseExcerpt };
  if (status === 429 || status >= 500) {
    const header = response.headers['retry-after'];
    const retryAfterMs = parseRetryAfter(Array.isArray(header) ? header[0] : header, options.now());
    return {
      result: undefined,
      error: new AlertDeliveryError('KR_ALERT_SINK_UNAVAILABLE', `alert sink ${options.sink} answered ${status}`, { ...context, status, ...excerpt }),
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    };
  }
  const error = new AlertDeliveryError('KR_ALERT_REJECTED', `alert sink ${options.sink} rejected the request with ${status}`, { ...context, status, ...excerpt });
  return { result: { delivered: false, attempts: attempt, error } };
}

/** Posts `req` until it is delivered, rejected, or the attempts are spent. Never throws. */
export async function postWithRetries(req: SinkRequest, options: DeliveryOptions): Promise<DeliveryResult> {
  const attempts = Math.max(1, options.retry.attempts);
  const maxBackoffMs = options.retry.maxBackoffMs ?? DEFAULT_ALERT_RETRY.maxBackoffMs;
  let lastError: AlertDeliveryError | undefined;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    const outcome = await attemptOnce(req, options, attempt);
    if (outcome.result) return outcome.result;
    lastError = outcome.error;
    if (attempt === attempts) break;
    const backoffMs = options.retry.initialBackoffMs * 2 ** (attempt - 1);
    // Retry-After is honoured up to the cap: a sink asking for an hour must not hold the
    // rotation (which awaits its alerts) for an hour; the last attempt's failure is audited.
    await options.sleep(Math.min(maxBackoffMs, outcome.retryAfterMs ?? backoffMs));
  }
  return {
    delivered: false,
    attempts,
    error: lastError ?? new AlertDeliveryError('KR_ALERT_NETWORK', `alert sink ${options.sink} could not be reached`, { sink: options.sink, sinkKind: options.sinkKind }),
  };
}
