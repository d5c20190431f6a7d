// Which request each sink kind builds. Typed by the kind, so a new sink kind in config.ts without
// an entry here fails the type check.
import type { AlertSinkConfig } from './config.ts';
import type { SinkRequest } from './deliver.ts';
import { pagerDutyAlertRequest } from './pagerduty.ts';
import { slackAlertRequest, slackSuccessRequest } from './slack.ts';
import type { Alert, SinkContext, SuccessNotice } from './types.ts';
import { webhookAlertRequest, webhookSuccessRequest } from './webhook.ts';

type SinkKind = AlertSinkConfig['kind'];
type ConfigOf<K extends SinkKind> = Extract<AlertSinkConfig, { kind: K }>;
type RequestBuilder<K extends SinkKind, M> = (
  name: string,
  config: ConfigOf<K>,
  message: M,
  context: SinkContext,
) => Promise<SinkRequest>;

const ALERT_REQUESTS: { [K in SinkKind]: RequestBuilder<K, Alert> } = {
  webhook: webhookAlertRequest,
  slack: slackAlertRequest,
  pagerduty: pagerDutyAlertRequest,
};

// PagerDuty pages people; a success is not an incident, so it has no success request.
const SUCCESS_REQUESTS: { [K in SinkKind]: RequestBuilder<K, SuccessNotice> | undefined } = {
  webhook: webhookSuccessRequest,
  slack: slackSuccessRequest,
  pagerduty: undefined,
};

export function buildAlertRequest(
  name: string,
  config: AlertSinkConfig,
  alert: Alert,
  context: SinkContext,
): Promise<SinkRequest> {
  // The map is indexed by the config's own kind, so the builder matches the config.
  const build = ALERT_REQUESTS[config.kind] as RequestBuilder<SinkKind, Alert>;
  return build(name, config, alert, context);
}

/** The success request for `config`, or undefined when its kind takes no success notices. */
export function buildSuccessRequest(
  name: string,
  config: AlertSinkConfig,
  notice: SuccessNotice,
  context: SinkContext,
): Promise<SinkRequest> | undefined {
  const build = SUCCESS_REQUESTS[config.kind] as RequestBuilder<SinkKind, SuccessNotice> | undefined;
  return build?.(name, config, notice, context);
}
