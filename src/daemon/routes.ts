// What the daemon's port serves, wired to the daemon: /readyz and /metrics, the signed trigger
// (scheduler/trigger.ts) and the leak intake's webhooks (leaks/github, leaks/gitguardian). The
// scheduler and the leak intake never import each other; this module, above both, hands each
// endpoint what it reads from the running daemon at request time: the generation in force, the
// launcher that starts rotations, the secrets read at the last (re)load, and whether shutdown began.
import type { AuditLog } from '../audit/public/events.ts';
import type { Secret } from '../audit/public/secret.ts';
import { sameBytes } from '../inbound/public/signature.ts';
import type { RejectionAudit } from '../inbound/public/rejection-audit.ts';
import type { ReplayRecords } from '../inbound/public/replay-records.ts';
import { createGitguardianEndpoint, GITGUARDIAN_LEAK_PATH } from '../leaks/public/gitguardian/endpoint.ts';
import {
  createGithubEndpoint,
  createGithubGate,
  GITHUB_LEAK_PATH,
  type GithubIntakeRuntime,
  type LeakEndpointOptions,
} from '../leaks/public/github/endpoint.ts';
import type { PageCache } from '../leaks/public/github/list.ts';
import { GithubRateBudget } from '../leaks/public/github/rate.ts';
import { reconcileOpenAlerts, type ReconcileOutcome } from '../leaks/public/github/reconcile.ts';
import { LeakIntake } from '../leaks/public/intake.ts';
import { MAX_LEAK_WEBHOOK_BYTES } from '../leaks/public/webhook-answer.ts';
import type { KeyrollMetrics } from '../metrics/public/metrics.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { isLeakReason, type RunTrigger } from '../rotation/public/types.ts';
import type { Generation } from '../scheduler/public/generation.ts';
import type { Launcher } from '../scheduler/public/launcher.ts';
import { readinessAnswer, type Readiness } from '../scheduler/public/readiness.ts';
import {
  createTriggerEndpoint,
  MAX_TRIGGER_BODY_BYTES,
  TRIGGER_PATH,
  type AcceptedTrigger,
} from '../scheduler/public/trigger.ts';
import { lookupIn } from '../scheduler/public/trigger-keys.ts';
import type { EndpointSecrets } from './endpoint-secrets.ts';
import type { DaemonRoutes, SignedRoute } from './server.ts';

/** The running daemon as its routes see it; every function is read per request. */
export interface DaemonParts {
  audit: AuditLog;
  now: () => Date;
  env: NodeJS.ProcessEnv;
  metrics: KeyrollMetrics;
  rejections: RejectionAudit;
  replays: ReplayRecords | undefined;
  launcher: Launcher;
  /** The generation in force: its policy, runtime and alerter. */
  current: () => Generation;
  secrets: () => EndpointSecrets;
  readiness: () => Readiness;
  /** False once shutdown began: no new work. */
  accepting: () => boolean;
  /** Registers work a shutdown waits for. */
  track: <T>(work: Promise<T>) => Promise<T>;
}

/** The port's routes, and the work that reads the same state as they do. */
export interface DaemonEndpoints {
  routes: DaemonRoutes;
  /**
   * One pass of the GitHub reconcile (leaks/github/reconcile.ts), sharing the webhook endpoint's
   * gate and rate budget: what a webhook delivery's job handles, the reconcile skips.
   */
  reconcileGithub: () => Promise<ReconcileOutcome>;
}

export function daemonRoutes(parts: DaemonParts): DaemonEndpoints {
  const leakIntake = new LeakIntake({
    policy: () => parts.current().policy,
    runtime: () => parts.current().runtime,
    alerter: () => parts.current().runtime.alerter,
    audit: () => parts.audit,
    // A leak report rotates its key through the launcher like a trigger (key locks, shutdown grace,
    // the generation held open), the slot of a two-slot entry named, and waits for its outcome.
    rotate: (key, slot, trigger, rotationId, stillNeeded) =>
      parts.launcher.runOne(parts.current(), key, trigger, rotationId, {
        ...(slot === undefined ? {} : { slot }),
        stillNeeded,
      }),
    onProvenDead: (ms) => {
      parts.metrics.recordLeakDead(ms);
    },
  });
  const leakEndpoint: Omit<LeakEndpointOptions, 'replay'> = {
    rejections: parts.rejections,
    now: parts.now,
    audit: () => parts.audit,
    alerter: () => parts.current().runtime.alerter,
    accepting: parts.accepting,
    background: (work) => {
      void parts.track(work);
    },
    intake: leakIntake,
  };
  const trigger = createTriggerEndpoint({
    keys: () => {
      const keys = parts.secrets().triggerKeys;
      return keys === undefined ? undefined : lookupIn(keys);
    },
    // Opened only when the trigger has keys (endpoint-secrets.ts): without them it answers 404.
    replay: () => parts.replays?.get('trigger'),
    rejections: parts.rejections,
    now: parts.now,
    audit: () => parts.audit,
    accepting: parts.accepting,
    policyKeys: () => parts.current().policy.keys,
    start: (keys, accepted, rotationIds, slots) => {
      startTrigger(parts, keys, accepted, rotationIds, slots);
    },
  });
  const githubGate = createGithubGate(leakEndpoint.background);
  const githubBudget = new GithubRateBudget(() => parts.now().getTime());
  const githubPages: PageCache = new Map();
  const githubSettings = (): GithubIntakeRuntime | undefined => parts.secrets().intake.github;
  const github = createGithubEndpoint({
    ...leakEndpoint,
    replay: () => parts.replays?.get('github'),
    settings: githubSettings,
    env: parts.env,
    gate: githubGate,
    budget: githubBudget,
  });
  const gitguardian = createGitguardianEndpoint({
    ...leakEndpoint,
    replay: () => parts.replays?.get('gitguardian'),
    settings: () => parts.secrets().intake.gitguardian,
  });
  const reconcileGithub = (): Promise<ReconcileOutcome> =>
    reconcileOpenAlerts({
      settings: githubSettings,
      gate: githubGate,
      budget: githubBudget,
      pages: githubPages,
      now: parts.now,
      accepting: parts.accepting,
      audit: leakEndpoint.audit,
      alerter: leakEndpoint.alerter,
      intake: leakIntake,
      env: parts.env,
    });
  return { routes: daemonRouteTable(parts, trigger, github, gitguardian), reconcileGithub };
}

function daemonRouteTable(
  parts: DaemonParts,
  trigger: SignedRoute['handle'],
  github: SignedRoute['handle'],
  gitguardian: SignedRoute['handle'],
): DaemonRoutes {
  return {
    readiness: () => readinessAnswer(parts.readiness()),
    metrics: async ({ authorization }) => {
      const access = metricsAccess(parts.secrets().metricsToken, authorization);
      if (access === 'refused')
        return {
          status: 401,
          body: { error: { code: 'bad-token', message: 'the bearer token does not match' } },
        };
      return {
        contentType: parts.metrics.registry.contentType,
        text: await parts.metrics.exposition({ perKey: access === 'per-key' }),
      };
    },
    signed: new Map([
      [TRIGGER_PATH, { maxBodyBytes: MAX_TRIGGER_BODY_BYTES, handle: trigger }],
      [GITHUB_LEAK_PATH, { maxBodyBytes: MAX_LEAK_WEBHOOK_BYTES, handle: github }],
      [GITGUARDIAN_LEAK_PATH, { maxBodyBytes: MAX_LEAK_WEBHOOK_BYTES, handle: gitguardian }],
    ]),
  };
}

/** An accepted trigger rotates in the background with the ids its answer promised. */
function startTrigger(
  parts: DaemonParts,
  keys: readonly KeyPolicy[],
  accepted: AcceptedTrigger,
  rotationIds: ReadonlyMap<string, string>,
  slots?: ReadonlyMap<string, string>,
): void {
  const { request } = accepted;
  // The semantics of `keyroll rotate`: leak and compromise bypass the minimum interval.
  // The actor is the caller whose key signed, never a name the body chose.
  const trigger: RunTrigger = {
    reason: request.reason,
    force: isLeakReason(request.reason),
    ignoreSchedule: true,
    actor: accepted.caller,
    ...(request.ticket ? { ticket: request.ticket } : {}),
  };
  void parts.track(
    parts.launcher.runAll(parts.current(), keys, trigger, rotationIds, slots ? { slots } : {}),
  );
}

/** Per-key series need the metrics token; a wrong token is refused rather than quietly answered with less. */
function metricsAccess(
  token: Secret | undefined,
  authorization: string | undefined,
): 'aggregate' | 'per-key' | 'refused' {
  if (authorization === undefined) return 'aggregate';
  if (token === undefined) return 'aggregate';
  const given = Buffer.from(/^Bearer (.+)$/i.exec(authorization.trim())?.[1] ?? '', 'utf8');
  const expected = Buffer.from(token.reveal(), 'utf8');
  return sameBytes(given, expected) ? 'per-key' : 'refused';
}
