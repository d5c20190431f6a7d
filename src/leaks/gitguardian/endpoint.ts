// POST /v1/leaks/gitguardian: GitGuardian's custom webhook. Verified before anything is read
// (timestamp window, then the HMAC), then judged: an event keyroll ignores is answered without
// recording anything. An incident that asks for work passes the intake gate (intake-gate.ts): a
// place in the bounded queue, the durable replay record (the signature, which covers the
// timestamp and the body, identifies the delivery), one alert per incident and action within the
// window. GitGuardian's events carry no secret value, so the flow stops where the payload does:
// the incident is audited (`leak.intake.unidentified`) and alerted critical with its page and the
// one command that finishes the job; identifying, rotating, proving and closing the incident need
// a person to supply the value (docs/runbook.md, "A secret leaked").
import type { AuditLog } from '../../audit/public/events.ts';
import type { Secret } from '../../audit/public/secret.ts';
import { singleHeader, type HttpAnswer, type InboundRequest } from '../../inbound/public/answers.ts';
import type { LeakEndpointOptions } from '../github/endpoint.ts';
import { IntakeGate } from '../intake-gate.ts';
import type { QueuePlace } from '../intake-queue.ts';
import { parseBody, refuseIntake, type IntakeRefusal } from '../webhook-answer.ts';
import { GITGUARDIAN_LEAK_ACTIONS, GitguardianEvent } from './payload.ts';
import {
  checkGitguardianSignature,
  GITGUARDIAN_MAX_SKEW_SECONDS,
  GITGUARDIAN_SIGNATURE_HEADER,
  GITGUARDIAN_TIMESTAMP_HEADER,
} from './signature.ts';

type GitguardianIncident = NonNullable<GitguardianEvent['incident']>;

export const GITGUARDIAN_LEAK_PATH = '/v1/leaks/gitguardian';

/** `intake.gitguardian` with its signature token resolved. */
export interface GitguardianIntakeRuntime {
  webhookSecret: Secret;
  /** Detector names whose incidents concern keyroll; undefined: all. */
  detectors?: readonly string[];
}

export interface GitguardianEndpointOptions extends LeakEndpointOptions {
  settings: () => GitguardianIntakeRuntime | undefined;
}

export function createGitguardianEndpoint(
  options: GitguardianEndpointOptions,
): (request: InboundRequest) => Promise<HttpAnswer> {
  const gate = new IntakeGate(options.background, options.limits);
  return async (request) => {
    const refuse = (why: IntakeRefusal): HttpAnswer =>
      refuseIntake(options.rejections, GITGUARDIAN_LEAK_PATH, request, why);
    if (!options.accepting()) return refuse('shutting-down');
    const settings = options.settings();
    if (settings === undefined) return refuse('disabled');
    if (request.body === 'too-large') return refuse('body-too-large');
    const now = options.now();
    const nowSeconds = Math.floor(now.getTime() / 1000);
    const signed = checkGitguardianSignature(
      settings.webhookSecret,
      request.body,
      singleHeader(request.headers[GITGUARDIAN_TIMESTAMP_HEADER]),
      singleHeader(request.headers[GITGUARDIAN_SIGNATURE_HEADER]),
      nowSeconds,
    );
    if (!signed.ok) return refuse(signed.why);
    const event = parseBody(request.body, GitguardianEvent);
    if (event === undefined) return refuse('invalid-body');
    const audit = options.audit();
    const incident = event.incident;
    const ref = incident === undefined ? 'no incident' : `incident ${String(incident.id)}`;
    const ignore = (fields: Record<string, unknown>, why: string): HttpAnswer => {
      if (gate.firstIgnored(signed.signature, now))
        audit.emit('leak.intake.ignored', {
          source: 'gitguardian',
          alert: ref,
          action: event.action,
          ...fields,
        });
      return { status: 202, body: { ignored: true, why } };
    };
    if (incident === undefined || !(GITGUARDIAN_LEAK_ACTIONS as readonly string[]).includes(event.action)) {
      return ignore({ why: 'action-not-handled' }, `action ${event.action} needs no rotation`);
    }
    const detector = incident.detector?.name;
    if (
      settings.detectors !== undefined &&
      (detector === undefined || !settings.detectors.includes(detector))
    ) {
      return ignore(
        { detector, why: 'detector-not-listed' },
        'the detector is not one of intake.gitguardian.detectors',
      );
    }
    // The signature is unique per (timestamp, body): a captured request replayed within the
    // window is refused, and past the window the timestamp check refuses it.
    const admission = await gate.admit({
      replay: options.replay(),
      id: signed.signature,
      expiresAt: signed.timestamp + GITGUARDIAN_MAX_SKEW_SECONDS,
      signedAt: signed.timestamp,
      alert: `${ref}:${event.action}`,
      now,
    });
    if (admission.kind === 'refused') return refuse(admission.why);
    if (admission.kind === 'duplicate-alert') return answerDuplicate(audit, ref, event.action, detector);
    alertUnidentified(
      options,
      audit,
      admission.place,
      { incident, action: event.action, ref, detector },
      request,
    );
    return { status: 202, body: { accepted: true, alert: ref, automated: 'alert-only' } };
  };
}

/** A second delivery for an incident and action alerted within the window: audited, answered 202. */
function answerDuplicate(
  audit: AuditLog,
  ref: string,
  action: string,
  detector: string | undefined,
): HttpAnswer {
  audit.emit('leak.intake.ignored', {
    source: 'gitguardian',
    alert: ref,
    action,
    detector,
    why: 'alert-already-handled',
  });
  return {
    status: 202,
    body: { ignored: true, why: `${ref} (${action}) was already alerted within the last hour` },
  };
}

/**
 * GitGuardian's events carry no secret value, so an accepted incident ends in an audit line and one
 * critical alert that tells a person how to finish the job (docs/runbook.md, "A secret leaked").
 */
function alertUnidentified(
  options: GitguardianEndpointOptions,
  audit: AuditLog,
  place: QueuePlace,
  accepted: { incident: GitguardianIncident; action: string; ref: string; detector: string | undefined },
  request: InboundRequest,
): void {
  const { incident, ref, detector } = accepted;
  const fields = {
    source: 'gitguardian',
    alert: ref,
    action: accepted.action,
    detector,
    severity: incident.severity ?? undefined,
    validity: incident.validity ?? undefined,
    alertUrl: incident.gitguardian_url,
  };
  audit.emit('leak.intake.accepted', { ...fields, remoteAddress: request.remoteAddress });
  audit.emit('leak.intake.unidentified', fields);
  const page = incident.gitguardian_url ?? 'the incident in GitGuardian';
  place.run(() =>
    options.alerter().send({
      severity: 'critical',
      summary: `GitGuardian reports a leaked ${incident.detector?.display_name ?? detector ?? 'secret'} (${ref}, validity ${incident.validity ?? 'unknown'}); its webhook carries no secret value, so keyroll cannot tell which key it is and rotated nothing`,
      step: 'leak-intake',
      errorCode: 'KR_LEAK_VALUE_NEEDED',
      nextAction: `open ${page}, copy the secret and pipe it to keyroll rotate --leaked-secret-stdin --reason leak --policy <policy>; when keyroll reports it refused (401), resolve the incident as revoked`,
      details: fields,
    }),
  );
}
