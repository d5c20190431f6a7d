// Generic webhook sink: POSTs the alert as JSON, for SIEMs, chat bridges and in-house tooling.
import { shownCode } from '../errors.ts';
import { resolveRef } from '../refs/public/secret-ref.ts';
import { insecureHttpHost } from '../http/public/transport.ts';
import type { WebhookSinkConfig } from './config.ts';
import type { SinkRequest } from './deliver.ts';
import { AlertDeliveryError } from './errors.ts';
import type { Alert, SinkContext, SuccessNotice } from './types.ts';

/**
 * The JSON a webhook receives for a failure: the Alert plus where and when it came from. Its
 * errorCode is the code as shown (a foreign one as is), and there is no foreignCode field.
 */
export type WebhookAlertBody = Omit<Alert, 'errorCode' | 'foreignCode'> & {
  errorCode: string;
  source: 'keyroll';
  event: 'rotation.failed';
  time: string;
};

/** The JSON a webhook receives after a stored value or a finished rotation (`stage`); never the secret. */
export type WebhookSuccessBody = SuccessNotice & {
  source: 'keyroll';
  event: 'rotation.succeeded';
  time: string;
};

export function webhookAlertBody(alert: Alert, time: Date): WebhookAlertBody {
  const { foreignCode: _shownBelow, ...fields } = alert;
  // Envelope fields last so an alert's details can never overwrite them. errorCode keeps its place.
  return {
    ...fields,
    errorCode: shownCode(alert),
    source: 'keyroll',
    event: 'rotation.failed',
    time: time.toISOString(),
  };
}

export function webhookSuccessBody(notice: SuccessNotice, time: Date): WebhookSuccessBody {
  return { ...notice, source: 'keyroll', event: 'rotation.succeeded', time: time.toISOString() };
}

async function webhookTarget(
  name: string,
  config: WebhookSinkConfig,
  context: SinkContext,
): Promise<Omit<SinkRequest, 'body'>> {
  let url: string;
  let auditUrl: string | undefined;
  if (config.url !== undefined) {
    url = config.url;
    auditUrl = config.url;
  } else if (config.urlRef !== undefined) {
    url = (await resolveRef(config.urlRef, context.env)).reveal();
    // The policy check cannot see a URL behind a reference (src/http/transport.ts); the host alone is named.
    const host = config.allowInsecureHttp === true ? undefined : insecureHttpHost(url);
    if (host !== undefined) {
      throw new AlertDeliveryError(
        'KR_ALERT_SINK_INVALID',
        `webhook sink ${name}: the URL from ${config.urlRef} uses plain http:// to ${host}; use https:// or set allowInsecureHttp: true on the sink`,
        { sink: name, sinkKind: 'webhook' },
      );
    }
  } else {
    throw new AlertDeliveryError('KR_ALERT_SINK_INVALID', `webhook sink ${name} has neither url nor urlRef`, {
      sink: name,
      sinkKind: 'webhook',
    });
  }
  const headers: Record<string, string> = {};
  for (const [header, ref] of Object.entries(config.headers)) {
    // Revealed for the wire only; the value stays registered with the sanitizer.
    headers[header.toLowerCase()] = (await resolveRef(ref, context.env)).reveal();
  }
  return {
    url,
    headers,
    timeoutMs: config.timeoutMs,
    deadlineMs: config.deadlineMs,
    ...(auditUrl === undefined ? {} : { auditUrl }),
  };
}

export async function webhookAlertRequest(
  name: string,
  config: WebhookSinkConfig,
  alert: Alert,
  context: SinkContext,
): Promise<SinkRequest> {
  return { ...(await webhookTarget(name, config, context)), body: webhookAlertBody(alert, context.now()) };
}

export async function webhookSuccessRequest(
  name: string,
  config: WebhookSinkConfig,
  notice: SuccessNotice,
  context: SinkContext,
): Promise<SinkRequest> {
  return { ...(await webhookTarget(name, config, context)), body: webhookSuccessBody(notice, context.now()) };
}
