// POST /v1/leaks/gitguardian: GitGuardian's custom webhook. Verified before anything is read
// (timestamp window, then the HMAC), recorded durably (the signature identifies the delivery),
// then judged. GitGuardian's events carry no secret value, so the flow stops where the payload
// does: the incident is audited (`leak.intake.unidentified`) and alerted critical with its page
// and the one command that finishes the job; identifying, rotating, proving and closing the
// incident need a person to supply the value (docs/runbook.md, "A secret leaked").
import type { Secret } from '../../audit/secret.ts';
import { singleHeader, type HttpAnswer, type InboundRequest } from '../../inbound/answers.ts';
import { claimOrRefuse } from '../../inbound/replay-record.ts';
import type { LeakEndpointOptions } from '../github/endpoint.ts';
import { parseBody, refuseIntake, type IntakeRefusal } from '../webhook-answer.ts';
import { GITGUARDIAN_LEAK_ACTIONS, GitguardianEvent } from './payload.ts';
import { checkGitguardianSignature, GITGUARDIAN_SIGNATURE_HEADER, GITGUARDIAN_TIMESTAMP_HEADER } from './signature.ts';

export const GITGUARDIAN_LEAK_PATH = '/v1/leaks/gitguardian';
export const GITGUARDIAN_REPLAY_CALLER = 'intake:gitguardian';
/** How long a signature is remembered (at least the timestamp window, past which it is refused as stale). */
const REPLAY_WINDOW_SECONDS = 300;

/** `intake.gitguardian` with its signature token resolved. */
export interface GitguardianIntakeRuntime {
  webhookSecret: Secret;
  /** Detector names whose incidents concern keyroll; undefined: all. */
  detectors?: readonly string[];
}

export interface GitguardianEndpointOptions extends LeakEndpointOptions {
  settings: () => GitguardianIntakeRuntime | undefined;
}

export function createGitguardianEndpoint(options: GitguardianEndpointOptions): (request: InboundRequest) => Promise<HttpAnswer> {
  return async (request) => {
    const refuse = (why: IntakeRefusal): HttpAnswer => refuseIntake(options.rejections, GITGUARDIAN_LEAK_PATH, request, why);
    if (!options.accepting()) return refuse('shutting-down');
    const settings = options.settings();
    if (settings === undefined) return refuse('disabled');
    if (request.body === 'too-large') return refuse('body-too-large');
    const nowSeconds = Math.floor(options.now().getTime() / 1000);
    const signed = checkGitguardianSignature(
      settings.webhookSecret,
      request.body,
      singleHeader(request.headers[GITGUARDIAN_TIMESTAMP_HEADER]),
      singleHeader(request.headers[GITGUARDIAN_SIGNATURE_HEADER]),
      nowSeconds,
    );
    if (!signed.ok) return refuse(signed.why);
    // The signature is unique per (timestamp, body): a captured request replayed within the
    // window is refused, and past the window the timestamp check refuses it.
    const unclaimed = await claimOrRefuse(options.replay(), GITGUARDIAN_REPLAY_CALLER, signed.signature, signed.timestamp, nowSeconds, REPLAY_WINDOW_SECONDS);
    if (unclaimed !== undefined) return refuse(unclaimed.why);

    const event = parseBody(request.body, GitguardianEvent);
    if (event === undefined) return refuse('invalid-body');
    const audit = options.audit();
    const incident = event.incident;
    const ref = incident === undefined ? 'no incident' : `incident ${String(incident.id)}`;
    if (incident === undefined || !(GITGUARDIAN_LEAK_ACTIONS as readonly string[]).includes(event.action)) {
      audit.emit('leak.intake.ignored', { source: 'gitguardian', alert: ref, action: event.action, why: 'action-not-handled' });
      return { status: 202, body: { ignored: true, why: `action ${event.action} needs no rotation` } };
    }
    const detector = incident.detector?.name;
    if (settings.detectors !== undefined && (detector === undefined || !settings.detectors.includes(detector))) {
      audit.emit('leak.intake.ignored', { source: 'gitguardian', alert: ref, action: event.action, detector, why: 'detector-not-listed' });
      return { status: 202, body: { ignored: true, why: 'the detector is not one of intake.gitguardian.detectors' } };
    }
    const fields = {
      source: 'gitguardian',
      alert: ref,
      action: event.action,
      detector,
      severity: incident.severity ?? undefined,
      validity: incident.validity ?? undefined,
      alertUrl: incident.gitguardian_url,
    };
    audit.emit('leak.intake.accepted', { ...fields, remoteAddress: request.remoteAddress });
    audit.emit('leak.intake.unidentified', fields);
    const page = incident.gitguardian_url ?? 'the incident in GitGuardian';
    options.background(
      options.alerter().send({
        severity: 'critical',
        summary: `GitGuardian reports a leaked ${incident.detector?.display_name ?? detector ?? 'secret'} (${ref}, validity ${incident.validity ?? 'unknown'}); its webhook carries no secret value, so keyroll cannot tell which key it is and rotated nothing`,
        step: 'leak-intake',
        errorCode: 'KR_LEAK_VALUE_NEEDED',
        nextAction: `open ${page}, copy the secret and pipe it to keyroll rotate --leaked-secret-stdin --reason leak --policy <policy>; when keyroll reports it refused (401), resolve the incident as revoked`,
        details: fields,
      }),
    );
    return { status: 202, body: { accepted: true, alert: ref, automated: 'alert-only' } };
  };
}
