// One HTTP POST of a JSON body to an alert sink, retried with exponential backoff on network
// errors, 5xx and 429 (honouring Retry-After). A 4xx other than 429 means the request is wrong
// and sending it again cannot help, so it is not retried.
//
// Whatever the sink does, a delivery ends in bounded time and memory (issue 12, section 2): each
// attempt has a total deadline (headers and body), at most EXCERPT_READ_BYTES of an error answer
// are read, and a shutdown cuts the delivery off after a short window (./shutdown.ts).
import { request, type Dispatcher } from 'undici';
import { readBodyPrefix } from '../http/public/body.ts';
import { parseRetryAfter } from '../api/public/retry-after.ts';
import { sanitizeText } from '../audit/public/sanitize.ts';
import { errorCode } from '../errors.ts';
import { AlertDeliveryError } from './errors.ts';
import type { AlertSinkConfig } from './config.ts';
import { deliveryCutoff, waitUnlessCutOff } from './shutdown.ts';

/** What a sink module builds: the request, with the URL and header values already resolved. */
export interface SinkRequest {
  /** Revealed from a reference where it came from one: it goes on the wire and nowhere else. */
  url: string;
  headers: Record<string, string>;
  body: unknown;
  /** Longest wait for the headers, and for the next byte of the body. */
  timeoutMs: number;
  /** Longest time one attempt may take, headers and body together. */
  deadlineMs: number;
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

export const DEFAULT_ALERT_RETRY: Required<RetryPolicy> = {
  attempts: 3,
  initialBackoffMs: 1_000,
  maxBackoffMs: 30_000,
};

export interface DeliveryOptions {
  sink: string;
  sinkKind: AlertSinkConfig['kind'];
  retry: RetryPolicy;
  /** Backoff between attempts; should end early when `signal` aborts (the cutoff), so no timer outlives it. */
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  now: () => number;
  dispatcher?: Dispatcher;
  /** Shutdown: once it aborts, the delivery has `shutdownWindowMs` left, then is abandoned. */
  signal?: AbortSignal;
  shutdownWindowMs?: number;
}

export type DeliveryResult =
  | { delivered: true; attempts: number; status: number }
  | { delivered: false; attempts: number; error: AlertDeliveryError };

const USER_AGENT = 'keyroll-alerts';
const EXCERPT_CHARS = 200;
// Read far more than the excerpt keeps, because the excerpt is sanitized before it is cut: a
// secret echoed by the sink (a webhook quoting its Authorization header) is blanked whole only if
// all of it was read. Any secret keyroll holds is much shorter than the difference.
const EXCERPT_READ_BYTES = 8 * 1024;
/** The networkCode of an attempt that ran past its total deadline (deadlineMs). */
export const DEADLINE_NETWORK_CODE = 'KR_ALERT_DEADLINE';

interface AttemptSignals {
  /** Aborts when this attempt's deadline passes. */
  deadline: AbortSignal;
  /** Aborts when a shutdown cuts the delivery off. */
  cutoff: AbortSignal;
}

type ExcerptRead = { excerpt?: string; deadlinePassed?: true };

/**
 * The sink's error answer, sanitized and then cut to EXCERPT_CHARS, read no further than
 * EXCERPT_READ_BYTES. A body that does not end in time yields no excerpt: the status already
 * says what happened.
 */
async function readExcerpt(
  body: Dispatcher.ResponseData['body'],
  signals: AttemptSignals,
): Promise<ExcerptRead> {
  try {
    const { text } = await readBodyPrefix(body, EXCERPT_READ_BYTES);
    const excerpt = sanitizeText(text).trim().slice(0, EXCERPT_CHARS);
    return excerpt === '' ? {} : { excerpt };
  } catch {
    return signals.deadline.aborted && !signals.cutoff.aborted ? { deadlinePassed: true } : {};
  }
}

interface AttemptOutcome {
  result: DeliveryResult | undefined;
  error?: AlertDeliveryError;
  retryAfterMs?: number;
}

function abandoned(options: DeliveryOptions, attempts: number): DeliveryResult {
  const error = new AlertDeliveryError(
    'KR_ALERT_ABORTED',
    `alert sink ${options.sink}: delivery abandoned at shutdown`,
    { sink: options.sink, sinkKind: options.sinkKind },
  );
  return { delivered: false, attempts, error };
}

async function attemptOnce(
  req: SinkRequest,
  options: DeliveryOptions,
  attempt: number,
  cutoff: AbortSignal,
): Promise<AttemptOutcome> {
  const context = { sink: options.sink, sinkKind: options.sinkKind };
  const signals: AttemptSignals = { deadline: AbortSignal.timeout(req.deadlineMs), cutoff };
  let response: Dispatcher.ResponseData;
  try {
    response = await request(req.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': USER_AGENT, ...req.headers },
      body: JSON.stringify(req.body),
      headersTimeout: req.timeoutMs,
      bodyTimeout: req.timeoutMs,
      // undici keeps the signal on the body too: an abort destroys a body still being read.
      signal: AbortSignal.any([signals.deadline, cutoff]),
      ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
    });
  } catch (error) {
    if (cutoff.aborted) return { result: abandoned(options, attempt) };
    const networkCode = signals.deadline.aborted ? DEADLINE_NETWORK_CODE : errorCode(error);
    return {
      result: undefined,
      error: new AlertDeliveryError(
        'KR_ALERT_NETWORK',
        `alert sink ${options.sink} could not be reached (${networkCode})`,
        { ...context, networkCode, cause: error },
      ),
    };
  }
  const status = response.statusCode;
  if (status >= 200 && status < 300) {
    try {
      // Drains at most 128 KiB (undici's dump limit), then closes; the deadline bounds a drip.
      await response.body.dump();
    } catch {
      // The sink took the alert; a body cut short does not change that.
    }
    return { result: { delivered: true, attempts: attempt, status } };
  }
  const { excerpt: responseExcerpt, deadlinePassed } = await readExcerpt(response.body, signals);
  if (cutoff.aborted) return { result: abandoned(options, attempt) };
  const extra = {
    ...(responseExcerpt === undefined ? {} : { responseExcerpt }),
    ...(deadlinePassed ? { networkCode: DEADLINE_NETWORK_CODE } : {}),
  };
  if (status === 429 || status >= 500) {
    const header = response.headers['retry-after'];
    const retryAfterMs = parseRetryAfter(Array.isArray(header) ? header[0] : header, options.now());
    return {
      result: undefined,
      error: new AlertDeliveryError(
        'KR_ALERT_SINK_UNAVAILABLE',
        `alert sink ${options.sink} answered ${status}`,
        { ...context, status, ...extra },
      ),
      ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
    };
  }
  const error = new AlertDeliveryError(
    'KR_ALERT_REJECTED',
    `alert sink ${options.sink} rejected the request with ${status}`,
    { ...context, status, ...extra },
  );
  return { result: { delivered: false, attempts: attempt, error } };
}

/** Posts `req` until it is delivered, rejected, cut off by a shutdown, or the attempts are spent. Never throws. */
export async function postWithRetries(req: SinkRequest, options: DeliveryOptions): Promise<DeliveryResult> {
  const attempts = Math.max(1, options.retry.attempts);
  const maxBackoffMs = options.retry.maxBackoffMs ?? DEFAULT_ALERT_RETRY.maxBackoffMs;
  const cutoff = deliveryCutoff(options.signal, options.shutdownWindowMs);
  try {
    let lastError: AlertDeliveryError | undefined;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      const outcome = await attemptOnce(req, options, attempt, cutoff.signal);
      if (outcome.result) return outcome.result;
      lastError = outcome.error;
      if (attempt === attempts) break;
      const backoffMs = options.retry.initialBackoffMs * 2 ** (attempt - 1);
      // Retry-After is honoured up to the cap: a sink asking for an hour must not hold the
      // rotation (which awaits its alerts) for an hour; the last attempt's failure is audited.
      if (
        !(await waitUnlessCutOff(
          options.sleep(Math.min(maxBackoffMs, outcome.retryAfterMs ?? backoffMs), cutoff.signal),
          cutoff.signal,
        ))
      ) {
        return abandoned(options, attempt);
      }
    }
    return {
      delivered: false,
      attempts,
      error:
        lastError ??
        new AlertDeliveryError('KR_ALERT_NETWORK', `alert sink ${options.sink} could not be reached`, {
          sink: options.sink,
          sinkKind: options.sinkKind,
        }),
    };
  } finally {
    cutoff.dispose();
  }
}
