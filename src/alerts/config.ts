import { z } from 'zod';
import { SecretRef } from '../refs/public/secret-ref.ts';
import { AllowInsecureHttp, HttpUrl } from '../http/public/transport.ts';

// The policy's `alerts.sinks.<name>` entries. URLs that embed credentials (Slack incoming
// webhooks) and routing keys are references, never values.
//
// Two limits per attempt: `timeoutMs` bounds the wait for the answer's headers and any silence in
// its body (undici's headersTimeout and bodyTimeout); `deadlineMs` bounds the whole attempt,
// headers and body. The second exists because the first restarts with every byte: a receiver
// dripping one byte every 3 s kept a rotation waiting for 12 minutes (issue 12, section 2).
const timeoutMs = z.number().int().positive().default(5_000);
const deadlineMs = z.number().int().positive().default(10_000);
export const WebhookSinkConfig = z.strictObject({
  kind: z.literal('webhook'),
  /** Plain URL (not secret). */
  url: HttpUrl.optional(),
  /** Or a reference when the URL itself carries a token. */
  urlRef: SecretRef.optional(),
  /** Extra headers whose values are references (e.g. Authorization: env:SIEM_TOKEN). */
  headers: z.record(z.string(), SecretRef).default({}),
  timeoutMs,
  deadlineMs,
  allowInsecureHttp: AllowInsecureHttp,
});

export const SlackSinkConfig = z.strictObject({
  kind: z.literal('slack'),
  webhookUrl: SecretRef,
  timeoutMs,
  deadlineMs,
  allowInsecureHttp: AllowInsecureHttp,
});

export const PagerDutySinkConfig = z.strictObject({
  kind: z.literal('pagerduty'),
  routingKey: SecretRef,
  /** Events API v2 endpoint; override for tests or EU service regions. */
  url: HttpUrl.default('https://events.pagerduty.com/v2/enqueue'),
  timeoutMs,
  deadlineMs,
  allowInsecureHttp: AllowInsecureHttp,
});

export const AlertSinkConfig = z.discriminatedUnion('kind', [
  WebhookSinkConfig,
  SlackSinkConfig,
  PagerDutySinkConfig,
]);
export type AlertSinkConfig = z.infer<typeof AlertSinkConfig>;
export type WebhookSinkConfig = z.infer<typeof WebhookSinkConfig>;
export type SlackSinkConfig = z.infer<typeof SlackSinkConfig>;
export type PagerDutySinkConfig = z.infer<typeof PagerDutySinkConfig>;
