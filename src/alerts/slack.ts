// Slack incoming-webhook sink. The webhook URL embeds its own token, so it is always a reference
// and never appears in the audit trail.
import { shownCode } from '../errors.ts';
import { resolveRef } from '../refs/public/secret-ref.ts';
import { insecureHttpHost } from '../http/public/transport.ts';
import type { SlackSinkConfig } from './config.ts';
import type { SinkRequest } from './deliver.ts';
import type { Alert, AlertSeverity, SinkContext, SuccessNotice } from './types.ts';

interface PlainText {
  type: 'plain_text';
  text: string;
}
interface Markdown {
  type: 'mrkdwn';
  text: string;
}
export type SlackBlock =
  | { type: 'header'; text: PlainText }
  | { type: 'section'; text?: Markdown; fields?: Markdown[] }
  | { type: 'context'; elements: Markdown[] };

export interface SlackMessage {
  /** Shown in notifications and by clients that do not render blocks. */
  text: string;
  blocks: SlackBlock[];
}

const SEVERITY_LABEL: Record<AlertSeverity, string> = {
  critical: ':rotating_light: CRITICAL',
  error: ':red_circle: ERROR',
  warning: ':warning: WARNING',
};

// Slack's limits: header text 150 chars, section text 3000, a field 2000.
const HEADER_MAX = 150;
const SECTION_MAX = 3000;
const FIELD_MAX = 2000;

/** Slack treats &, < and > as control characters in message text (links, mentions). */
export function escapeSlackText(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

function field(label: string, value: string): Markdown {
  return { type: 'mrkdwn', text: clip(`*${label}*\n${escapeSlackText(value)}`, FIELD_MAX) };
}

export function slackAlertMessage(alert: Alert, time: Date): SlackMessage {
  const label = SEVERITY_LABEL[alert.severity];
  const subject =
    alert.keyId === undefined
      ? `keyroll ${alert.step} failed`
      : `keyroll: key ${alert.keyId} failed at ${alert.step}`;
  const fields = [
    field('Severity', alert.severity),
    ...(alert.keyId === undefined ? [] : [field('Key', alert.keyId)]),
    ...(alert.organizationId === undefined ? [] : [field('Organization', alert.organizationId)]),
    field('Step', alert.step),
    field('Error code', shownCode(alert)),
    ...(alert.rotationId === undefined ? [] : [field('Rotation', alert.rotationId)]),
  ];
  return {
    text: `${label} ${escapeSlackText(subject)}: ${escapeSlackText(alert.summary)}`,
    blocks: [
      {
        type: 'header',
        text: { type: 'plain_text', text: clip(`${label.replace(/^:\S+: /, '')} ${subject}`, HEADER_MAX) },
      },
      { type: 'section', text: { type: 'mrkdwn', text: clip(escapeSlackText(alert.summary), SECTION_MAX) } },
      { type: 'section', fields },
      {
        type: 'section',
        text: {
          type: 'mrkdwn',
          text: clip(`*Next action*\n${escapeSlackText(alert.nextAction)}`, SECTION_MAX),
        },
      },
      { type: 'context', elements: [{ type: 'mrkdwn', text: `keyroll · ${time.toISOString()}` }] },
    ],
  };
}

export function slackSuccessMessage(notice: SuccessNotice, time: Date): SlackMessage {
  const places = notice.destinations.map((d) => `${d.backend}:${d.path} (version ${d.version})`).join(', ');
  const text = `:white_check_mark: keyroll rotated key ${escapeSlackText(notice.keyId)} (${escapeSlackText(notice.organizationId)}); stored in ${escapeSlackText(places)}`;
  return {
    text,
    blocks: [
      { type: 'section', text: { type: 'mrkdwn', text: clip(text, SECTION_MAX) } },
      {
        type: 'context',
        elements: [
          { type: 'mrkdwn', text: `rotation ${escapeSlackText(notice.rotationId)} · ${time.toISOString()}` },
        ],
      },
    ],
  };
}

async function slackTarget(
  config: SlackSinkConfig,
  context: SinkContext,
): Promise<Omit<SinkRequest, 'body'>> {
  const url = (await resolveRef(config.webhookUrl, context.env)).reveal();
  // The policy check cannot see a URL behind a reference (src/http/transport.ts); the host alone is named.
  const host = config.allowInsecureHttp === true ? undefined : insecureHttpHost(url);
  if (host !== undefined)
    throw new Error(
      `the URL from ${config.webhookUrl} uses plain http:// to ${host}; use https:// or set allowInsecureHttp: true on the sink`,
    );
  return { url, headers: {}, timeoutMs: config.timeoutMs, deadlineMs: config.deadlineMs };
}

export async function slackAlertRequest(
  _name: string,
  config: SlackSinkConfig,
  alert: Alert,
  context: SinkContext,
): Promise<SinkRequest> {
  return { ...(await slackTarget(config, context)), body: slackAlertMessage(alert, context.now()) };
}

export async function slackSuccessRequest(
  _name: string,
  config: SlackSinkConfig,
  notice: SuccessNotice,
  context: SinkContext,
): Promise<SinkRequest> {
  return { ...(await slackTarget(config, context)), body: slackSuccessMessage(notice, context.now()) };
}
