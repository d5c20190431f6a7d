// POST /v1/leaks/github: GitHub's secret_scanning_alert webhook. In order, cheapest first: is the
// source enabled, is the body within its cap, does X-Hub-Signature-256 verify (nothing of the
// body is read before). Then the event is judged: a ping or an event keyroll ignores is answered
// without recording anything (it costs no write and starts no work, however often it comes).
// A delivery that asks for work passes the intake gate (intake-gate.ts): a place in the bounded
// queue, the durable replay record, one job per alert and action within the window. It is
// audited (`leak.intake.accepted`) and answered 202 at once (GitHub waits 10 s at most); the
// alert is fetched, its secret identified, rotated, proven dead and the alert resolved in the
// background, where every failure is audited and alerted (invariant 7).
//
// GitHub signs the body and nothing else: X-GitHub-Delivery and X-GitHub-Event are not covered,
// and no time is signed. So a delivery is known by the SHA-256 digest of its raw body, kept for
// GITHUB_REPLAY_WINDOW_SECONDS: a captured body replayed under a fresh delivery id is the same
// delivery (409), and so is GitHub's own Redeliver of it. Past the window a replay costs one
// fetch of an alert that is resolved by then (or still open because a person must act), at most
// once per alert and action per window.
import { createHash } from 'node:crypto';
import type { Dispatcher } from 'undici';
import type { Alerter } from '../../alerts/public/types.ts';
import type { AuditLog } from '../../audit/public/events.ts';
import type { Secret } from '../../audit/public/secret.ts';
import { singleHeader, type HttpAnswer, type InboundRequest } from '../../inbound/public/answers.ts';
import type { RejectionAudit } from '../../inbound/public/rejection-audit.ts';
import type { ReplayRecord } from '../../inbound/public/replay-claim.ts';
import { resolveRef } from '../../refs/public/secret-ref.ts';
import { ScannerApiError } from '../errors.ts';
import { IntakeGate, type IntakeLimits } from '../intake-gate.ts';
import {
  actorOf,
  reportIntakeFailure,
  type LeakIntake,
  type LeakKeyResult,
  type LeakReport,
} from '../intake.ts';
import { parseBody, refuseIntake, type IntakeRefusal } from '../webhook-answer.ts';
import { fetchGithubAlert, resolveGithubAlert, type GithubClientOptions } from './client.ts';
import { GITHUB_LEAK_ACTIONS, GithubAlertWebhook, type GithubAlertRef } from './payload.ts';
import type { GithubRateBudget } from './rate.ts';
import type { GithubReconcileRuntime } from './reconcile-settings.ts';
import {
  checkGithubSignature,
  GITHUB_DELIVERY_HEADER,
  GITHUB_EVENT_HEADER,
  GITHUB_SIGNATURE_HEADER,
} from './signature.ts';

export const GITHUB_LEAK_PATH = '/v1/leaks/github';
/** How long the digest of a delivery's body is remembered: one hour (GitHub signs no time to bound it by). */
export const GITHUB_REPLAY_WINDOW_SECONDS = 3600;
const DELIVERY_ID = /^[A-Za-z0-9-]{8,64}$/;

/** `intake.github` with its webhook secret resolved (at start and on reload; the token is read per alert). */
export interface GithubIntakeRuntime {
  webhookSecret: Secret;
  apiUrl: string;
  tokenRef: string;
  /** Where and how often the daemon lists open alerts itself; undefined: no reconcile. */
  reconcile?: GithubReconcileRuntime;
}

export interface LeakEndpointOptions {
  /** This source's own replay record (inbound/replay-records.ts). */
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
  /** The intake gate's window and queue (DEFAULT_INTAKE_LIMITS). */
  limits?: Partial<IntakeLimits>;
}

export interface GithubEndpointOptions extends LeakEndpointOptions {
  settings: () => GithubIntakeRuntime | undefined;
  env: NodeJS.ProcessEnv;
  dispatcher?: Dispatcher;
  /** The gate the reconcile shares (createGithubGate); a gate of its own when omitted. */
  gate?: IntakeGate;
  /** Reads the rate headers of every GitHub answer, for the reconcile's budget. */
  budget?: GithubRateBudget;
}

/** What the fetch-identify-rotate-prove-resolve path needs, whichever way the alert came. */
export type GithubAlertHandling = Pick<
  GithubEndpointOptions,
  'audit' | 'alerter' | 'intake' | 'env' | 'dispatcher' | 'budget'
>;

/** The GitHub intake's gate: its window is the replay window (one job per alert and action an hour). */
export function createGithubGate(
  background: (work: Promise<void>) => void,
  limits: Partial<IntakeLimits> = {},
): IntakeGate {
  return new IntakeGate(background, { alertWindowMs: GITHUB_REPLAY_WINDOW_SECONDS * 1000, ...limits });
}

export function createGithubEndpoint(
  options: GithubEndpointOptions,
): (request: InboundRequest) => Promise<HttpAnswer> {
  const gate = options.gate ?? createGithubGate(options.background, options.limits);
  return async (request) => {
    const refuse = (why: IntakeRefusal): HttpAnswer =>
      refuseIntake(options.rejections, GITHUB_LEAK_PATH, request, why);
    if (!options.accepting()) return refuse('shutting-down');
    const settings = options.settings();
    if (settings === undefined) return refuse('disabled');
    if (request.body === 'too-large') return refuse('body-too-large');
    const signed = checkGithubSignature(
      settings.webhookSecret,
      request.body,
      singleHeader(request.headers[GITHUB_SIGNATURE_HEADER]),
    );
    if (signed !== 'ok') return refuse(signed);

    // Not signed, so it identifies nothing; kept on the audit lines to find the delivery in GitHub's list.
    const delivery = singleHeader(request.headers[GITHUB_DELIVERY_HEADER]);
    if (delivery === undefined || !DELIVERY_ID.test(delivery)) return refuse('invalid-body');
    const event = singleHeader(request.headers[GITHUB_EVENT_HEADER]);
    if (event === 'ping') return { status: 200, body: { ok: true, event: 'ping' } };
    const now = options.now();
    const digest = createHash('sha256').update(request.body).digest('hex');
    const audit = options.audit();
    const ignore = (fields: Record<string, unknown>, why: string): HttpAnswer => {
      if (gate.firstIgnored(digest, now))
        audit.emit('leak.intake.ignored', { source: 'github', delivery, ...fields });
      return { status: 202, body: { ignored: true, why } };
    };
    if (event !== 'secret_scanning_alert')
      return ignore(
        { event, why: 'not-secret-scanning-alert' },
        'only secret_scanning_alert events are handled',
      );
    const payload = parseBody(request.body, GithubAlertWebhook);
    if (payload === undefined) return refuse('invalid-body');
    const ref: GithubAlertRef = {
      owner: payload.repository.owner.login,
      repo: payload.repository.name,
      number: payload.alert.number,
    };
    const report: LeakReport = {
      source: 'github',
      ref: `${payload.repository.full_name}#${ref.number}`,
      ...(payload.alert.html_url === undefined ? {} : { url: payload.alert.html_url }),
    };
    if (!(GITHUB_LEAK_ACTIONS as readonly string[]).includes(payload.action)) {
      return ignore(
        { alert: report.ref, action: payload.action, why: 'action-not-handled' },
        `action ${payload.action} needs no rotation`,
      );
    }

    const admission = await gate.admit({
      replay: options.replay(),
      id: digest,
      expiresAt: Math.floor(now.getTime() / 1000) + GITHUB_REPLAY_WINDOW_SECONDS,
      alert: `${report.ref}:${payload.action}`,
      ref: report.ref,
      now,
    });
    if (admission.kind === 'refused') return refuse(admission.why);
    if (admission.kind === 'duplicate-alert') return answerDuplicate(audit, report, payload.action, delivery);
    audit.emit('leak.intake.accepted', {
      source: 'github',
      alert: report.ref,
      action: payload.action,
      delivery,
      secretType: payload.alert.secret_type,
      remoteAddress: request.remoteAddress,
    });
    admission.place.run(() => handleGithubAlert(options, settings, ref, report));
    return { status: 202, body: { accepted: true, alert: report.ref } };
  };
}

/** A second delivery for an alert and action already in hand: audited once, answered 202 so GitHub stops. */
function answerDuplicate(audit: AuditLog, report: LeakReport, action: string, delivery: string): HttpAnswer {
  audit.emit('leak.intake.ignored', {
    source: 'github',
    alert: report.ref,
    action,
    delivery,
    why: 'alert-already-handled',
  });
  return {
    status: 202,
    body: {
      ignored: true,
      why: `alert ${report.ref} (${action}) is already being handled or was within the last hour`,
    },
  };
}

/** Fetch, identify, rotate, prove, resolve. Never rejects. */
export async function handleGithubAlert(
  options: GithubAlertHandling,
  settings: GithubIntakeRuntime,
  ref: GithubAlertRef,
  report: LeakReport,
): Promise<void> {
  const audit = options.audit().child({ actor: actorOf(report), reason: 'leak' });
  const fail = (step: string, error: unknown, nextAction?: string): Promise<void> =>
    reportIntakeFailure(audit, options.alerter(), {
      report,
      step,
      error,
      ...(nextAction === undefined ? {} : { nextAction }),
    });
  let client: GithubClientOptions;
  try {
    client = githubClient(settings, await resolveRef(settings.tokenRef, options.env), options);
  } catch (error) {
    await fail('github-token', error);
    return;
  }
  let alert;
  try {
    alert = await fetchGithubAlert(client, ref);
  } catch (error) {
    await fail(
      'fetch-alert',
      error,
      `fix the cause, then copy the secret from the alert page and pipe it to keyroll rotate --leaked-secret-stdin --reason leak (a redelivery of the same webhook is refused for an hour after the first)`,
    );
    return;
  }
  if (alert.state !== 'open') {
    audit.emit('leak.intake.ignored', { source: 'github', alert: report.ref, why: 'alert-not-open' });
    return;
  }
  if (alert.secret === undefined) {
    await fail(
      'fetch-alert',
      new ScannerApiError(
        'KR_GITHUB_NO_SECRET',
        'get-alert',
        "GitHub's alert answer carries no secret (the token may see the alert but not its secret)",
      ),
    );
    return;
  }
  const verdict = await options.intake.handleLeak(
    alert.htmlUrl === undefined ? report : { ...report, url: alert.htmlUrl },
    alert.secret,
  );
  // unmatched: audited (leak.unmatched) and left open for whoever owns that secret; open: the
  // intake or the proof alerted; the alert stays open until a person closes it.
  if (verdict.kind !== 'closed') return;
  const comment = resolutionComment(verdict.keys);
  try {
    await resolveGithubAlert(client, ref, comment);
  } catch (error) {
    await fail(
      'resolve-alert',
      error,
      `the key is rotated and the API refuses the leaked value; resolve the alert as revoked by hand${report.url === undefined ? '' : ` (${report.url})`}`,
    );
    return;
  }
  audit.emit('leak.intake.resolved', {
    source: 'github',
    alert: report.ref,
    resolution: 'revoked',
    keys: verdict.keys.map((key) => ({
      keyId: key.keyId,
      slot: key.slot,
      rotationId: key.rotationId,
      result: key.result,
    })),
  });
}

export function githubClient(
  settings: Pick<GithubIntakeRuntime, 'apiUrl'>,
  token: Secret,
  options: Pick<GithubAlertHandling, 'dispatcher' | 'budget'>,
): GithubClientOptions {
  const { budget } = options;
  return {
    apiUrl: settings.apiUrl,
    token,
    ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
    ...(budget === undefined
      ? {}
      : {
          observe: (answer) => {
            budget.observe(answer);
          },
        }),
  };
}

/** Names each rotation; GitHub shows it to whoever reads the alert (key ids, never a value). */
export function resolutionComment(keys: readonly LeakKeyResult[]): string {
  const parts = keys.map((key) => {
    const name = key.slot === undefined ? key.keyId : `${key.keyId} (slot ${key.slot})`;
    return key.result === 'already-dead'
      ? `${name}: the value was already rotated away`
      : `${name}: rotated by keyroll, rotation ${key.rotationId ?? '-'}`;
  });
  return `${parts.join('; ')}. The API refuses the leaked value (401).`.slice(0, 1000);
}
