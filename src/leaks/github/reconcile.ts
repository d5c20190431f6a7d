// The GitHub reconcile (invariant 13, level not edge): GitHub never redelivers a webhook delivery
// that failed (the daemon down, restarting, slower than 10 s), so the daemon also lists the open
// alerts of the policy's secret types itself, at start and every intake.github.reconcileInterval,
// and hands each one it has not handled to the webhook's own path (handleGithubAlert: fetch,
// identify, rotate, prove dead, resolve). An alert already resolved is not listed (and is
// re-checked by that path's fetch); a leaked value already dead is proven dead and the alert
// closed without a roll (previous-value.ts); an alert a delivery's job is handling, or that got a
// job within the window, is skipped (the intake gate is shared).
//
// It spends the token's budget carefully: each page is a conditional request (a 304 is free),
// and before every request and every alert it asks the rate budget (rate.ts), which keeps a
// reserve for the webhook path and waits out Retry-After and Reset. Alerts are handled a few at
// a time through the intake's own queue, on runners of their own (never the deliveries').
//
// One call is one pass: the daemon calls it at start and on its interval (daemon/reconcile-loop.ts);
// a leader elected later calls the same function when it takes the lead.
import { errorCode, errorMessage, typedCode } from '../../errors.ts';
import { resolveRef } from '../../refs/public/secret-ref.ts';
import { mapWithConcurrency } from '../../rotation/public/concurrency.ts';
import type { IntakeGate, ReconcileSkip } from '../intake-gate.ts';
import type { LeakReport } from '../intake.ts';
import type { GithubClientOptions } from './client.ts';
import {
  githubClient,
  handleGithubAlert,
  type GithubAlertHandling,
  type GithubIntakeRuntime,
} from './endpoint.ts';
import { firstPageUrl, listPage, MAX_PAGES, scopeName, type ListedAlert, type PageCache } from './list.ts';
import type { GithubRateBudget, RateDeferral } from './rate.ts';
import type { GithubReconcileRuntime } from './reconcile-settings.ts';

export interface GithubReconcileOptions extends GithubAlertHandling {
  settings: () => GithubIntakeRuntime | undefined;
  /** The GitHub endpoint's gate (createGithubGate): one job per alert whichever way it came. */
  gate: IntakeGate;
  budget: GithubRateBudget;
  /** Each page's last answer, for conditional requests; kept across reconciles. */
  pages: PageCache;
  now: () => Date;
  /** False once shutdown began: no new alert is started. */
  accepting: () => boolean;
}

/** Requests one alert's handling costs at most: the fetch and the resolve. */
const ALERT_COST = 2;

export type ReconcileOutcome =
  | { kind: 'off' }
  | { kind: 'deferred'; deferral: RateDeferral }
  | { kind: 'failed'; step: string; errorCode: string }
  | {
      kind: 'done';
      listed: number;
      found: number;
      skipped: Record<ReconcileSkip, number>;
      requests: number;
      notModified: number;
      truncated: boolean;
    };

/** One pass over the open alerts. Never rejects: failures are audited and alerted. */
export async function reconcileOpenAlerts(options: GithubReconcileOptions): Promise<ReconcileOutcome> {
  const settings = options.settings();
  const reconcile = settings?.reconcile;
  if (settings === undefined || reconcile === undefined) return { kind: 'off' };
  const audit = options.audit();
  const { budget } = options;
  audit.emit('leak.reconcile.started', {
    source: 'github',
    scopes: reconcile.scopes.map(scopeName),
    secretTypes: reconcile.secretTypes,
    intervalMs: reconcile.intervalMs,
    remaining: budget.remaining,
  });
  const deferred = (deferral: RateDeferral, step: string): ReconcileOutcome => {
    audit.emit('leak.reconcile.rate_limited', {
      source: 'github',
      step,
      why: deferral.why,
      until: new Date(deferral.untilMs).toISOString(),
      ...(deferral.why === 'reserve' ? { remaining: deferral.remaining, reserve: deferral.reserve } : {}),
    });
    return { kind: 'deferred', deferral };
  };
  const failed = (step: string, error: unknown, scope?: string): Promise<ReconcileOutcome> =>
    reportReconcileFailure(options, reconcile, { step, error, ...(scope === undefined ? {} : { scope }) });

  const before = budget.deferral(reconcile.scopes.length);
  if (before !== undefined) return deferred(before, 'list');
  let client;
  try {
    client = githubClient(settings, await resolveRef(settings.tokenRef, options.env), options);
  } catch (error) {
    return failed('github-token', error);
  }
  const listing = await listOpenAlerts(options, settings, reconcile, client);
  if (listing.kind === 'deferred') return deferred(listing.deferral, 'list');
  if (listing.kind === 'failed') return failed('list-alerts', listing.error, listing.scope);
  const { found, requests, notModified, truncated } = listing;

  const handling = await handleFoundAlerts(options, settings, found);
  if (handling.stopped !== undefined) return deferred(handling.stopped, 'handle');
  const { handled, skipped } = handling;
  const outcome: ReconcileOutcome = {
    kind: 'done',
    listed: found.size,
    found: handled,
    skipped,
    requests,
    notModified,
    truncated,
  };
  audit.emit('leak.reconcile.finished', {
    source: 'github',
    listed: found.size,
    found: handled,
    skipped,
    requests,
    notModified,
    truncated,
    remaining: budget.remaining,
  });
  return outcome;
}

/** A listing that could not finish: audited and alerted once, so the operator fixes the token or scopes. */
async function reportReconcileFailure(
  options: GithubReconcileOptions,
  reconcile: GithubReconcileRuntime,
  failure: { step: string; error: unknown; scope?: string },
): Promise<ReconcileOutcome> {
  const { step, error, scope } = failure;
  options.audit().emit('leak.reconcile.failed', {
    source: 'github',
    step,
    errorCode: errorCode(error),
    error: errorMessage(error),
    ...(scope === undefined ? {} : { scope }),
  });
  await options.alerter().send({
    severity: 'error',
    summary: `keyroll could not list the open GitHub secret scanning alerts${scope === undefined ? '' : ` of ${scope}`} at ${step}: ${errorMessage(error)}`,
    step: 'leak-reconcile',
    ...typedCode(error),
    nextAction: `fix the cause (token, its permission "Secret scanning alerts" read and write, intake.github's organizations/repositories/enterprises); the next reconcile in ${String(Math.round(reconcile.intervalMs / 1000))}s tries again, and webhook deliveries are handled meanwhile`,
    details: { source: 'github', intakeStep: step, ...(scope === undefined ? {} : { scope }) },
  });
  return { kind: 'failed', step, errorCode: errorCode(error) };
}

type AlertListing =
  | { kind: 'deferred'; deferral: RateDeferral }
  | { kind: 'failed'; error: unknown; scope: string }
  | {
      kind: 'listed';
      found: Map<string, ListedAlert>;
      requests: number;
      notModified: number;
      truncated: boolean;
    };

/** Every scope's open alerts, page by page, asking the rate budget before each request. */
async function listOpenAlerts(
  options: GithubReconcileOptions,
  settings: GithubIntakeRuntime,
  reconcile: GithubReconcileRuntime,
  client: GithubClientOptions,
): Promise<AlertListing> {
  const { budget } = options;
  // An alert listed by an organization and by one of its repositories is one alert.
  const found = new Map<string, ListedAlert>();
  let requests = 0;
  let notModified = 0;
  let truncated = false;
  for (const scope of reconcile.scopes) {
    let url: string | undefined = firstPageUrl(settings.apiUrl, scope, reconcile.secretTypes);
    for (let page = 0; url !== undefined; page++) {
      if (page === MAX_PAGES) {
        truncated = true;
        break;
      }
      const deferral = budget.deferral(1);
      if (deferral !== undefined) return { kind: 'deferred', deferral };
      let step;
      try {
        step = await listPage(client, scope, url, options.pages);
      } catch (error) {
        // An answer that was a rate limit is waited out, not alerted.
        const limited = budget.deferral(0);
        if (limited?.why === 'rate-limited') return { kind: 'deferred', deferral: limited };
        return { kind: 'failed', error, scope: scopeName(scope) };
      }
      requests++;
      if (step.notModified) notModified++;
      for (const alert of step.alerts) found.set(alert.name, alert);
      url = step.next;
    }
  }
  return { kind: 'listed', found, requests, notModified, truncated };
}

/**
 * Hands each listed alert the gate admits to the webhook's own path, a few at a time; stops
 * starting new ones when the budget runs short or shutdown begins.
 */
async function handleFoundAlerts(
  options: GithubReconcileOptions,
  settings: GithubIntakeRuntime,
  found: Map<string, ListedAlert>,
): Promise<{ handled: number; skipped: Record<ReconcileSkip, number>; stopped: RateDeferral | undefined }> {
  const audit = options.audit();
  const skipped: Record<ReconcileSkip, number> = {
    'in-flight': 0,
    'handled-within-window': 0,
    'intake-busy': 0,
  };
  let handled = 0;
  let stopped: RateDeferral | undefined;
  await mapWithConcurrency([...found.values()], options.gate.reconcileConcurrency, async (alert) => {
    if (stopped !== undefined || !options.accepting()) return;
    const deferral = options.budget.deferral(ALERT_COST);
    if (deferral !== undefined) {
      stopped = deferral;
      return;
    }
    const admission = options.gate.admitReconciled(alert.name, options.now());
    if (admission.kind === 'skipped') {
      skipped[admission.why]++;
      audit.emit('leak.reconcile.skipped', { source: 'github', alert: alert.name, why: admission.why });
      return;
    }
    handled++;
    audit.emit('leak.reconcile.found', {
      source: 'github',
      alert: alert.name,
      secretType: alert.secretType,
      ...(alert.htmlUrl === undefined ? {} : { alertUrl: alert.htmlUrl }),
    });
    const report: LeakReport = {
      source: 'github',
      ref: alert.name,
      ...(alert.htmlUrl === undefined ? {} : { url: alert.htmlUrl }),
    };
    await new Promise<void>((resolve) => {
      admission.place.run(async () => {
        try {
          await handleGithubAlert(options, settings, alert.ref, report);
        } finally {
          resolve();
        }
      });
    });
  });
  return { handled, skipped, stopped };
}
