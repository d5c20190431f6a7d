// Everything a run talks to, built once from the policy: the API client (with keyroll's own
// credential and the shared rate limiter), one instance per named backend, the alerter, the
// success notifier and the audit log. Commands and the daemon build one and close it after.
import { resolve as resolvePath } from 'node:path';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Dispatcher } from 'undici';
import { ApiClient, MAX_SHARED_PAUSE_MS } from '../api/public/client.ts';
import { oauthClientCredentials, refCredential, type CredentialProvider } from '../api/public/credentials.ts';
import { RateLimiter } from '../api/public/rate-limiter.ts';
import { createAlerter } from '../alerts/public/alerter.ts';
import { createNotifier, type Notifier } from '../alerts/public/notify.ts';
import type { AuditedAlerter } from '../alerts/public/alerter.ts';
import type { Alerter } from '../alerts/public/types.ts';
import type { AuditLog } from '../audit/public/events.ts';
import type { QuotaDeps } from '../backends/public/quota/observer.ts';
import { createBackend } from '../backends/public/registry.ts';
import type { Backend } from '../backends/public/types.ts';
import { lockOwnerOf } from './lock-owner.ts';
import { leaseNeededMs, writeTimeoutOf } from '../policy/public/lease.ts';
import { primaryDestination, type KeyPolicy, type Policy } from '../policy/public/schema.ts';
import { sleep } from './backoff.ts';
import type {
  HolderProver,
  ResolvedDestination,
  ResolvedKey,
  RotationDeps,
  RotationObserver,
} from './types.ts';

export interface RuntimeOptions {
  audit: AuditLog;
  /** Overrides the policy's API base URL (the demo points it at the in-process emulator). */
  apiBaseUrl?: string;
  /** Overrides keyroll's credential (tests, the demo). */
  credentials?: CredentialProvider;
  dispatcher?: Dispatcher;
  now?: () => Date;
  /** Overrides the monotonic clock leases and durations are measured on (tests that move time). */
  monotonicMs?: () => number;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  checkpoint?: (step: string) => Promise<void>;
  env?: NodeJS.ProcessEnv;
  rollBudget?: RotationDeps['rollBudget'];
  /** Metrics hooks for rotations (the daemon, the Pushgateway export). */
  observer?: RotationObserver;
  /** Replaces the policy's alerter (tests, the daemon's metrics wrapper). */
  alerter?: Alerter;
  /** Wraps each backend instance (tests inject faults here; the daemon adds metrics). */
  wrapBackend?: (name: string, backend: Backend) => Backend;
  /** Runners that spend the same backend quotas at once (`run --shard i/N`: N); default 1. */
  shards?: number;
  /** Proves lock holders dead (the daemon in Kubernetes: src/leader/holder-liveness.ts); absent elsewhere. */
  holderProver?: HolderProver;
}

export interface Runtime {
  readonly audit: AuditLog;
  readonly alerter: Alerter;
  /** Webhook notices of new values (the consumers' refresh sends them: src/consumers/). */
  readonly notifier: Notifier;
  readonly api: ApiClient;
  readonly credentialDescription: string;
  readonly owner: string;
  /** Throws when a backend is not defined in the policy, or (a hand-made policy) the key has no destination. */
  resolveKey(key: KeyPolicy): ResolvedKey;
  /** One cheap authenticated call (a one-item project list) proving keyroll's credential works. */
  checkApiCredential(): Promise<void>;
  rotationDeps(audit: AuditLog): RotationDeps;
  close(): Promise<void>;
}

/** keyroll's own credential as the policy names it; `env` is where its `env:NAME` references are looked up. */
export function credentialFromPolicy(
  policy: Policy,
  dispatcher: Dispatcher | undefined,
  env: NodeJS.ProcessEnv = process.env,
): CredentialProvider {
  const credential = policy.api.credential;
  if (credential.type === 'bearer') return refCredential(credential.token, env);
  return oauthClientCredentials({
    tokenUrl: credential.tokenUrl,
    clientId: credential.clientId,
    clientSecret: refCredential(credential.clientSecret, env),
    ...(credential.scope ? { scope: credential.scope } : {}),
    ...(credential.audience ? { audience: credential.audience } : {}),
    ...(dispatcher ? { dispatcher } : {}),
  });
}

export async function createRuntime(policy: Policy, options: RuntimeOptions): Promise<Runtime> {
  const now = options.now ?? (() => new Date());
  const credentials = options.credentials ?? credentialFromPolicy(policy, options.dispatcher);
  const limiter = new RateLimiter({ perMinute: policy.api.rateLimitPerMinute });
  const api = new ApiClient({
    baseUrl: options.apiBaseUrl ?? policy.api.baseUrl,
    credentials,
    limiter,
    headersTimeoutMs: policy.api.timeouts.headersMs,
    bodyTimeoutMs: policy.api.timeouts.bodyMs,
    methods: policy.api.methods,
    ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
  });
  const backends = await openPolicyBackends(policy, options, now);
  const alerter =
    options.alerter ??
    createAlerter({
      sinks: policy.alerts.sinks,
      audit: options.audit,
      ...(options.env ? { env: options.env } : {}),
    });
  const notifier = createNotifier({
    sinks: policy.alerts.sinks,
    audit: options.audit,
    ...(options.env ? { env: options.env } : {}),
  });
  // In a pod the owner names the pod and this process's start, so a holder's death can be proven
  // (src/rotation/lock-owner.ts); elsewhere host/pid/random, as before.
  const owner = lockOwnerOf(options.env ?? process.env);

  const resolve = (destination: {
    backend: string;
    target: ResolvedDestination['target'];
  }): ResolvedDestination => {
    const backend = backends.get(destination.backend);
    // The policy loader already checked names; this guards programmatic callers.
    if (!backend) throw new Error(`backend ${destination.backend} is not defined in the policy`);
    return { backendName: destination.backend, backend, target: destination.target };
  };

  return {
    audit: options.audit,
    alerter,
    notifier,
    api,
    owner,
    credentialDescription: credentials.description,
    resolveKey: (key) => {
      const [primary, ...others] = key.destinations.map(resolve);
      if (!primary) throw new Error(`key ${key.id} has no destination`);
      return { destinations: [primary, ...others], primary, others, fallbacks: key.fallbacks.map(resolve) };
    },
    checkApiCredential: async () => {
      await api.listProjects({ limit: 1 });
    },
    rotationDeps: (audit) => ({
      api,
      audit,
      // Alert and notification events carry the run's context (run id, actor, reason).
      alerter: withAudit(alerter, audit),
      // Absolute, so the path in alerts and audit events is one an operator can open.
      ...(policy.escrow
        ? { escrow: { ...policy.escrow, directory: resolvePath(policy.escrow.directory) } }
        : {}),
      owner,
      now,
      sleep: options.sleep ?? sleep,
      newRotationId: randomUUID,
      monotonicMs: options.monotonicMs ?? (() => performance.now()),
      // The 429 budget of a run is also the longest one 429 may pause every caller (the client's cap).
      rollBudget: options.rollBudget ?? { attempts: 5, maxWaitMs: MAX_SHARED_PAUSE_MS },
      leaseNeededMs: (key) => keyLeaseNeededMs(policy, key),
      ...(options.checkpoint ? { checkpoint: options.checkpoint } : {}),
      ...(options.observer ? { observer: options.observer } : {}),
      ...(options.holderProver ? { holderProver: options.holderProver } : {}),
    }),
    close: async () => {
      await api.close();
      for (const backend of backends.values()) await backend.close();
    },
  };
}

/** Every backend the policy names, opened once for the whole run (wrapped when a test asks). */
async function openPolicyBackends(
  policy: Policy,
  options: RuntimeOptions,
  now: () => Date,
): Promise<Map<string, Backend>> {
  const backends = new Map<string, Backend>();
  const quota = quotaDeps(options);
  for (const [name, config] of Object.entries(policy.backends)) {
    const backend = await createBackend(name, config, {
      now,
      quota,
      ...(options.env ? { env: options.env } : {}),
    });
    backends.set(name, options.wrapBackend ? options.wrapBackend(name, backend) : backend);
  }
  return backends;
}

/**
 * How long a key's lock must last for its roll, store and verify (invariant 9).
 * The skew is the contenders' margin, not ours: this runner's lease already ends at its own expiry.
 */
function keyLeaseNeededMs(policy: Policy, key: KeyPolicy): number {
  return leaseNeededMs({
    rollAttemptMs: policy.api.timeouts.headersMs + policy.api.timeouts.bodyMs,
    writeTimeoutMs: writeTimeoutOf(policy.backends[primaryDestination(key).backend]),
    attempts: key.store.attempts,
    maxBackoffMs: key.store.maxBackoffMs,
    clockSkewMs: 0,
  });
}

/**
 * How backends report their request quotas: paced waits and throttle answers to the metrics
 * observer, throttle answers also to the audit trail at debug level. A throttle answer met by a
 * write after a roll is only counted here: the store step audits its retry after the store
 * (invariant 2: no audit line between the roll answer and the write).
 */
function quotaDeps(options: RuntimeOptions): QuotaDeps {
  const observer = options.observer;
  return {
    shards: options.shards ?? 1,
    observer: {
      paced: (event) => observer?.paced?.(event),
      throttled: (event) => {
        if (!event.afterRoll)
          options.audit.emit('backend.throttled', {
            backend: event.backend,
            backendKind: event.kind,
            group: event.group,
            operation: event.operation,
            path: event.path,
            attempt: event.attempt,
            waitMs: event.waitMs,
            ...(event.retryAfterMs === undefined ? {} : { retryAfterMs: event.retryAfterMs }),
            ...(event.gaveUp === true ? { gaveUp: true } : {}),
          });
        observer?.throttled?.(event);
      },
    },
  };
}

function withAudit(alerter: Alerter, audit: AuditLog): Alerter {
  return 'withAudit' in alerter ? (alerter as AuditedAlerter).withAudit(audit) : alerter;
}
