// PagerDuty Events API v2 sink. The routing key is a reference, revealed only into the request
// body; it never appears in the audit trail (and, being a Secret, is blanked if it ever did).
import { randomUUID } from 'node:crypto';
import { shownCode } from '../errors.ts';
import { resolveRef } from '../refs/public/secret-ref.ts';
import type { PagerDutySinkConfig } from './config.ts';
import type { SinkRequest } from './deliver.ts';
import type { Alert, AlertSeverity, SinkContext } from './types.ts';

export interface PagerDutyEvent {
  routing_key: string;
  event_action: 'trigger';
  dedup_key: string;
  client: 'keyroll';
  payload: {
    summary: string;
    source: string;
    severity: AlertSeverity;
    timestamp: string;
    component?: string;
    group?: string;
    class: string;
    custom_details: Record<string, unknown>;
  };
}

// Events API v2 rejects summaries over 1024 characters.
const SUMMARY_MAX = 1024;

/**
 * One incident per key rotation: a second trigger for the same rotation (an escalation) updates
 * that incident instead of opening another. Run-level alerts (no key) get one per run, step and
 * error code. An alert without a rotation id (a leak report, a failed reload) is tied to nothing
 * that would make a later alert the same incident, so it gets a key of its own (`fresh`): a
 * second, unrelated leak of the same key opens a second incident and pages, instead of folding
 * into one left open. The key is made once per send, so a delivery retried by the sink keeps it.
 */
export function pagerDutyDedupKey(alert: Alert, fresh: () => string = randomUUID): string {
  const rotation = alert.rotationId ?? `alert-${fresh()}`;
  if (alert.keyId !== undefined) return `keyroll:${alert.keyId}:${rotation}`;
  return `keyroll:run:${rotation}:${alert.step}:${shownCode(alert)}`;
}

export function pagerDutyEvent(alert: Alert, routingKey: string, time: Date): PagerDutyEvent {
  const summary =
    alert.summary.length <= SUMMARY_MAX ? alert.summary : `${alert.summary.slice(0, SUMMARY_MAX - 1)}…`;
  return {
    routing_key: routingKey,
    event_action: 'trigger',
    dedup_key: pagerDutyDedupKey(alert),
    client: 'keyroll',
    payload: {
      summary,
      source: 'keyroll',
      // keyroll's severities are a subset of PagerDuty's (critical, error, warning, info).
      severity: alert.severity,
      timestamp: time.toISOString(),
      ...(alert.keyId === undefined ? {} : { component: alert.keyId }),
      ...(alert.organizationId === undefined ? {} : { group: alert.organizationId }),
      class: shownCode(alert),
      custom_details: {
        step: alert.step,
        errorCode: shownCode(alert),
        nextAction: alert.nextAction,
        ...(alert.keyId === undefined ? {} : { keyId: alert.keyId }),
        ...(alert.organizationId === undefined ? {} : { organizationId: alert.organizationId }),
        ...(alert.rotationId === undefined ? {} : { rotationId: alert.rotationId }),
        ...(alert.details ?? {}),
      },
    },
  };
}

export async function pagerDutyAlertRequest(
  _name: string,
  config: PagerDutySinkConfig,
  alert: Alert,
  context: SinkContext,
): Promise<SinkRequest> {
  // Sanitizing happened before this point (the alerter sanitizes the Alert); the routing key is
  // added after, so the sanitizer — which knows it as a resolved Secret — cannot blank it.
  const routingKey = (await resolveRef(config.routingKey, context.env)).reveal();
  return {
    url: config.url,
    auditUrl: config.url,
    headers: {},
    timeoutMs: config.timeoutMs,
    deadlineMs: config.deadlineMs,
    body: pagerDutyEvent(alert, routingKey, context.now()),
  };
}
