// POST /v1/leaks/github: GitHub's secret_scanning_alert webhook. In order, cheapest first: is the
// source enabled, is the body within its cap, does X-Hub-Signature-256 verify (nothing of the
// body is read before), is the delivery new (durable record, inbound/replay-record.ts). Then the event is
// judged, audited (`leak.intake.accepted`) and answered 202 at once (GitHub waits 10 s at most);
// the alert is fetched, its secret identified, rotated, proven dead and the alert resolved in the
// background, where every failure is audited and alerted (invariant 7).
import type { Dispatcher } from 'undici';
import type { Alerter } from '../../alerts/types.ts';
import type { AuditLog } from '../../audit/events.ts';
import type { Secret } from '../../audit/secret.ts';
import { resolveRef } from '../../policy/refs.ts';
import { singleHeader, type HttpAnswer, type InboundRequest } from '../../inbound/answers.ts';
import type { RejectionAudit } from '../../inbound/rejection-audit.ts';
import { claimOrRefuse, type ReplayRecord } from '../../inbound/replay-record.ts';
import { ScannerApiError } from '../errors.ts';
import { actorOf, reportIntakeFailure, type LeakIntake, type LeakKeyResult, type LeakReport } from '../intake.ts';
import { parseBody, refuseIntake, type IntakeRefusal } from '../webhook-answer.ts';
import { fetchGithubAlert, resolveGithubAlert, type GithubClientOptions } from './client.ts';
import { GITHUB_LEAK_ACTIONS, GithubAlertWebhook, type GithubAlertRef } from './payload.ts';
import { checkGithubSignature, GITHUB_DELIVERY_HEADER, GITHUB_EVENT_HEADER, GITHUB_SIGNATURE_HEADER } from './signature.ts';

export const GITHUB_LEAK_PATH = '/v1/leaks/github';
/** The replay record's caller name for GitHub deliveries (":" keeps it apart from trigger callers). */
export const GITHUB_REPLAY_CALLER = 'intake:github';
const DELIVERY_ID = /^[A-Za-z0-9-]{8,64}$/;
/** How long a delivery id is remembered. */
const GITHUB_DELIVERY_WINDOW_SECONDS = 300;

/** `intake.github` with its webhook secret resolved (at start and on reload; the token is read per alert). */
export interface GithubIntakeRuntime {
  webhookSecret: Secret;
  apiUrl: string;
  tokenRef: string;
}

export interface LeakEndpointOptions {
  replay: () => ReplayRecord | undefined;
  rejections: RejectionAudit;
  now: () => Date;
  audit: () => AuditLog;
  alerter: () => Alerter;
  /** False once shutdown began. */
  accepting: () => boolean;
  /** Runs accepted work in the background, where shutdown waits for it. Must not throw. */
  background: (work: Promise<void>) => void;
  intake: LeakIntake;
}

export interface GithubEndpointOptions extends LeakEndpointOptions {
  settings: () => GithubIntakeRuntime | undefined;
  env: NodeJS.ProcessEnv;
  dispatcher?: Dispatcher;
}

export function createGithubEndpoint(options: GithubEndpointOptions): (request: InboundRequest) => Promise<HttpAnswer> {
  return async (request) => {
    const refuse = (why: IntakeRefusal): HttpAnswer => refuseIntake(options.rejections, GITHUB_LEAK_PATH, request, why);
    if (!options.accepting()) return refuse('shutting-down');
    const settings = options.settings();
    if (settings === undefined) return refuse('disabled');
    if (request.body === 'too-large') return refuse('body-too-large');
    const signed = checkGithubSignature(settings.webhookSecret, request.body, singleHeader(request.headers[GITHUB_SIGNATURE_HEADER]));
    if (signed !== 'ok') return refuse(signed);

    const delivery = singleHeader(request.headers[GITHUB_DELIVERY_HEADER]);
    if (delivery === undefined || !DELIVERY_ID.test(delivery)) return refuse('invalid-body');
    // GitHub signs no time: the delivery id is kept for the record's window (5 minutes); past
    // it, a replayed delivery finds its alert resolved on GitHub and does nothing.
    const nowSeconds = Math.floor(options.now().getTime() / 1000);
    const unclaimed = await claimOrRefuse(options.replay(), GITHUB_REPLAY_CALLER, delivery, nowSeconds, nowSeconds, GITHUB_DELIVERY_WINDOW_SECONDS);
    if (unclaimed !== undefined) return refuse(unclaimed.why);

    const event = singleHeader(request.headers[GITHUB_EVENT_HEADER]);
    if (event === 'ping') return { status: 200, body: { ok: true, event: 'ping' } };
    const audit = options.audit();
    if (event !== 'secret_scanning_alert') {
      audit.emit('leak.intake.ignored', { source: 'github', delivery, event, why: 'not-secret-scanning-alert' });
      return { status: 202, body: { ignored: true, why: 'only secret_scanning_alert events are handled' } };
    }
    const payload = parseBody(request.body, GithubAlertWebhook);
    if (payload === undefined) return refuse('invalid-body');
    const ref: GithubAlertRef = { owner: payload.repository.owner.login, repo: payload.repository.name, number: payload.alert.number };
    const report: LeakReport = { source: 'github', ref: `${payload.repository.full_name}#${ref.number}`, ...(payload.alert.html_url === undefined ? {} : { url: payload.alert.html_url }) };
    if (!(GITHUB_LEAK_ACTIONS as readonly string[]).includes(payload.action)) {
      audit.emit('leak.intake.ignored', { source: 'github', alert: report.ref, delivery, action: payload.action, why: 'action-not-handled' });
      return { status: 202, body: { ignored: true, why: `action ${payload.action} needs no rotation` } };
    }
    audit.emit('leak.intake.accepted', { source: 'github', alert: report.ref, action: payload.action, delivery, secretType: payload.alert.secret_type, remoteAddress: request.remoteAddress });
    options.background(handleGithubAlert(options, settings, ref, report));
    return { status: 202, body: { accepted: true, alert: report.ref } };
  };
}

/** Fetch, identify, rotate, prove, resolve. Never rejects. */
export async function handleGithubAlert(options: GithubEndpointOptions, settings: GithubIntakeRuntime, ref: GithubAlertRef, report: LeakReport): Promise<void> {
  const audit = options.audit().child({ actor: actorOf(report), reason: 'leak' });
  const fail = (step: string, error: unknown, nextAction?: string): Promise<void> =>
    reportIntakeFailure(audit, options.alerter(), { report, step, error, ...(nextAction === undefined ? {} : { nextAction }) });
  let client: GithubClientOptions;
  try {
    client = { apiUrl: settings.apiUrl, token: await resolveRef(settings.tokenRef, options.env), ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}) };
  } catch (error) {
    await fail('github-token', error);
    return;
  }
  let alert;
  try {
    alert = await fetchGithubAlert(client, ref);
  } catch (error) {
    await fail('fetch-alert', error, `fix the cause, then redeliver the webhook from the repository's webhook settings (Recent Deliveries), or pipe the value to keyroll rotate --leaked-secret-stdin --reason leak`);
    return;
  }
  if (alert.state !== 'open') {
    audit.emit('leak.intake.ignored', { source: 'github', alert: report.ref, why: 'alert-not-open' });
    return;
  }
  if (alert.secret === undefined) {
    await fail('fetch-alert', new ScannerApiError('KR_GITHUB_NO_SECRET', 'get-alert', "GitHub's alert answer carries no secret (the token may see the alert but not its secret)"));
    return;
  }
  const verdict = await options.intake.handleLeak(alert.htmlUrl === undefined ? report : { ...report, url: alert.htmlUrl }, alert.secret);
  // unmatched: audited (leak.unmatched) and left open for whoever owns that secret; open: the
  // intake or the proof alerted; the alert stays open until a person closes it.
  if (verdict.kind !== 'closed') return;
  const comment = resolutionComment(verdict.keys);
  try {
    await resolveGithubAlert(client, ref, comment);
  } catch (error) {
    await fail('resolve-alert', error, `the key is rotated and the API refuses the leaked value; resolve the alert as revoked by hand${report.url === undefined ? '' : ` (${report.url})`}`);
    return;
  }
  audit.emit('leak.intake.resolved', { source: 'github', alert: report.ref, resolution: 'revoked', keys: verdict.keys.map((key) => ({ keyId: key.keyId, slot: key.slot, rotationId: key.rotationId, result: key.result })) });
}

/** Names each rotation; GitHub shows it to whoever reads the alert (key ids, never a value). */
export function resolutionComment(keys: readonly LeakKeyResult[]): string {
  const parts = keys.map((key) => {
    const name = key.slot === undefined ? key.keyId : `${key.keyId} (slot ${key.slot})`;
    return key.result === 'already-dead' ? `${name}: the value was already rotated away` : `${name}: rotated by keyroll, rotation ${key.rotationId ?? '-'}`;
  });
  return `${parts.join('; ')}. The API refuses the leaked value (401).`.slice(0, 1000);
}
