// Why an alert or notification did not reach its sink. Context is kept as fields; the message
// never holds the sink's URL (a Slack webhook URL is a credential) nor anything from the body.
import { KeyrollError } from '../errors.ts';
import type { AlertSinkConfig } from './config.ts';

export type AlertDeliveryErrorCode =
  /** The sink answered 4xx other than 429: the request itself is wrong, so it is not retried. */
  | 'KR_ALERT_REJECTED'
  /** The sink answered 5xx or 429 on every attempt. */
  | 'KR_ALERT_SINK_UNAVAILABLE'
  /**
   * Connection refused or reset, DNS failure or timeout on every attempt. An attempt that ran past
   * its total deadline (deadlineMs) has networkCode KR_ALERT_DEADLINE.
   */
  | 'KR_ALERT_NETWORK'
  /** A shutdown (SIGTERM/SIGINT) cut the delivery off: it was abandoned, not retried. */
  | 'KR_ALERT_ABORTED'
  /** The policy names a sink it does not define. */
  | 'KR_ALERT_SINK_UNKNOWN'
  /** The sink cannot take this kind of message (a success notice to PagerDuty). */
  | 'KR_ALERT_SINK_UNSUPPORTED'
  /** The sink's configuration cannot produce a request (a webhook with neither url nor urlRef). */
  | 'KR_ALERT_SINK_INVALID';

const RETRYABLE: ReadonlySet<AlertDeliveryErrorCode> = new Set([
  'KR_ALERT_SINK_UNAVAILABLE',
  'KR_ALERT_NETWORK',
]);

export interface AlertDeliveryContext {
  sink: string;
  sinkKind?: AlertSinkConfig['kind'];
  status?: number;
  /** The low-level code of a network failure (ECONNREFUSED, UND_ERR_HEADERS_TIMEOUT, ...). */
  networkCode?: string;
  /** The first characters of the sink's error answer, sanitized, then cut (Slack says `invalid_payload`, PagerDuty lists errors). */
  responseExcerpt?: string;
  cause?: unknown;
}

export class AlertDeliveryError extends KeyrollError {
  override name = 'AlertDeliveryError';
  declare readonly code: AlertDeliveryErrorCode;
  readonly sink: string;
  readonly sinkKind: AlertSinkConfig['kind'] | undefined;
  readonly status: number | undefined;
  readonly networkCode: string | undefined;
  readonly responseExcerpt: string | undefined;

  constructor(code: AlertDeliveryErrorCode, message: string, context: AlertDeliveryContext) {
    super(code, message, { cause: context.cause, retryable: RETRYABLE.has(code) });
    this.sink = context.sink;
    this.sinkKind = context.sinkKind;
    this.status = context.status;
    this.networkCode = context.networkCode;
    this.responseExcerpt = context.responseExcerpt;
  }

  override toFields(): Record<string, unknown> {
    return {
      ...super.toFields(),
      ...(this.status === undefined ? {} : { status: this.status }),
      ...(this.networkCode === undefined ? {} : { networkCode: this.networkCode }),
      ...(this.responseExcerpt === undefined ? {} : { responseExcerpt: this.responseExcerpt }),
    };
  }
}
