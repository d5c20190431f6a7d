// Sending one message to one named sink: look the sink up, build its request (resolving
// references at send time, so a rotated Slack URL or routing key is picked up), post it with
// retries, and describe the outcome in fields fit for the audit trail. Shared by alerts and
// success notifications; never throws.
import type { Dispatcher } from 'undici';
import { errorMessage, KeyrollError, shownCode, typedCode, type TypedCode } from '../errors.ts';
import type { AlertSinkConfig } from './config.ts';
import { postWithRetries, type RetryPolicy, type SinkRequest } from './deliver.ts';
import { AlertDeliveryError } from './errors.ts';
import type { SinkContext } from './types.ts';

export interface SinkDispatchOptions {
  sinks: Readonly<Record<string, AlertSinkConfig>>;
  retry: RetryPolicy;
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  context: SinkContext;
  dispatcher?: Dispatcher;
  /** Shutdown: see AlerterOptions.signal. */
  signal?: AbortSignal;
  shutdownWindowMs?: number;
}

/** Builds the request for one sink; undefined when the sink cannot take this kind of message. */
export type SinkRequestBuilder = (
  name: string,
  config: AlertSinkConfig,
  context: SinkContext,
) => Promise<SinkRequest> | undefined;

export type SinkOutcome =
  | {
      sent: true;
      /** sink, sinkKind, attempts, status, url (plain policy URLs only). */
      fields: Record<string, unknown>;
    }
  | {
      sent: false;
      /** As when sent, and errorCode (as shown: a foreign code as is) and error. */
      fields: Record<string, unknown>;
      /** Why: the catalogue code, and the foreign code it stands for. */
      code: TypedCode;
      /** A plain sentence (never the secret). */
      error: string;
    };

function failure(base: Record<string, unknown>, attempts: number, error: unknown): SinkOutcome {
  const code = typedCode(error);
  const message = errorMessage(error);
  const fields: Record<string, unknown> = {
    ...base,
    attempts,
    errorCode: shownCode(code),
    error: message,
  };
  if (error instanceof AlertDeliveryError) {
    if (error.status !== undefined) fields.status = error.status;
    if (error.networkCode !== undefined) fields.networkCode = error.networkCode;
    if (error.responseExcerpt !== undefined) fields.responseExcerpt = error.responseExcerpt;
  }
  return { sent: false, fields, code, error: message };
}

export async function dispatchToSink(
  name: string,
  build: SinkRequestBuilder,
  options: SinkDispatchOptions,
): Promise<SinkOutcome> {
  const config = Object.hasOwn(options.sinks, name) ? options.sinks[name] : undefined;
  if (config === undefined) {
    return failure(
      { sink: name },
      0,
      new AlertDeliveryError('KR_ALERT_SINK_UNKNOWN', `alert sink ${name} is not defined in the policy`, {
        sink: name,
      }),
    );
  }
  const base: Record<string, unknown> = { sink: name, sinkKind: config.kind };
  let request: SinkRequest | undefined;
  try {
    request = await build(name, config, options.context);
  } catch (error) {
    // A reference that cannot be read (RefError names the variable or file, never a value).
    if (error instanceof KeyrollError) return failure(base, 0, error);
    return failure(
      base,
      0,
      new AlertDeliveryError('KR_ALERT_SINK_INVALID', `alert sink ${name} could not build its request`, {
        sink: name,
        sinkKind: config.kind,
        cause: error,
      }),
    );
  }
  if (request === undefined) {
    return failure(
      base,
      0,
      new AlertDeliveryError(
        'KR_ALERT_SINK_UNSUPPORTED',
        `alert sink ${name} (${config.kind}) does not take this kind of message`,
        { sink: name, sinkKind: config.kind },
      ),
    );
  }
  if (request.auditUrl !== undefined) base.url = request.auditUrl;
  try {
    const result = await postWithRetries(request, {
      sink: name,
      sinkKind: config.kind,
      retry: options.retry,
      sleep: options.sleep,
      now: () => options.context.now().getTime(),
      ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
      ...(options.signal ? { signal: options.signal } : {}),
      ...(options.shutdownWindowMs === undefined ? {} : { shutdownWindowMs: options.shutdownWindowMs }),
    });
    if (result.delivered)
      return { sent: true, fields: { ...base, attempts: result.attempts, status: result.status } };
    return failure(base, result.attempts, result.error);
  } catch (error) {
    return failure(base, 0, error);
  }
}
