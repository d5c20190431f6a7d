// `keyroll daemon`: croner schedules from the policy, a sweep every check interval, the HTTP
// server (health, readiness, metrics, the signed trigger), SIGHUP reloads and a graceful
// shutdown that lets every rolled key finish its store (invariant 2 and 4: a secret is never
// abandoned between roll and store). Due-ness always comes from the backends' state, so a
// restarted daemon does not rotate again what its predecessor rotated. See docs/daemon.md.
import { randomUUID } from 'node:crypto';
import { createAlerter } from '../alerts/alerter.ts';
import { abandonDeliveriesOn } from '../alerts/shutdown.ts';
import type { AuditLog } from '../audit/events.ts';
import type { Secret } from '../audit/secret.ts';
import { errorCode, errorMessage, UsageError } from '../errors.ts';
import { DEFAULT_REJECTIONS_AUDITED_PER_MINUTE, RejectionAudit } from '../inbound/rejection-audit.ts';
import { ReplayRecords } from '../inbound/replay-records.ts';
import { sameBytes } from '../inbound/signature.ts';
import { createMetrics, type KeyrollMetrics } from '../metrics/metrics.ts';
import { loadPolicy } from '../policy/load.ts';
import { announcePlainHttp } from '../policy/plain-http-notice.ts';
import { resolveRef } from '../refs/secret-ref.ts';
import type { KeyPolicy, Policy } from '../policy/schema.ts';
import { createRuntime, type RuntimeOptions } from '../rotation/runtime.ts';
import { isLeakReason, type KeyOutcome, type RunTrigger } from '../rotation/types.ts';
import { Generation } from './generation.ts';
import { KeyHealth } from './key-health.ts';
import { KeyLocks } from './key-locks.ts';
import { Launcher } from './launcher.ts';
import { preflightDestinations, readinessAnswer, type Readiness } from './readiness.ts';
import { groupSchedules, startSchedules, type ScheduleInfo } from './schedule.ts';
import { DEFAULT_HTTP_LIMITS, startDaemonServer, type DaemonServer, type HttpLimits, type ListenAddress } from './server.ts';
import { checkKeys } from './sweep.ts';
import { SweepLoop } from './sweep-loop.ts';
import { createTriggerEndpoint, type AcceptedTrigger } from './trigger.ts';
import { lookupIn, resolveTriggerKeys, type TriggerKeySpec } from './trigger-keys.ts';
import { createGitguardianEndpoint, GITGUARDIAN_LEAK_PATH } from '../leaks/gitguardian/endpoint.ts';
import { createGithubEndpoint, GITHUB_LEAK_PATH } from '../leaks/github/endpoint.ts';
import { LeakIntake } from '../leaks/intake.ts';
import { intakeEnabled, resolveIntake, type IntakeRuntime } from '../leaks/settings.ts';
import { MAX_LEAK_WEBHOOK_BYTES } from '../leaks/webhook-answer.ts';

export const DAEMON_DEFAULTS = {
  graceMs: 30_000,
  checkIntervalMs: 5 * 60_000,
  retryFailedAfterMs: 60 * 60_000,
  concurrency: 4,
} as const;

export interface DaemonOptions {
  /** Re-read on every reload (SIGHUP). */
  policyFile: string;
  /** The policy already loaded from policyFile (the CLI validates it before starting); loaded when omitted. */
  policy?: Policy;
  listen: ListenAddress;
  /** How long shutdown waits for in-flight rotations. */
  graceMs?: number;
  /** How often every key's state is read (maxAge keys, leftover intents, missed slots, overdue gauge). */
  checkIntervalMs?: number;
  /** A key whose sweep-started rotation failed is retried by the sweep after this (its schedule still ticks). */
  retryFailedAfterMs?: number;
  concurrency?: number;
  /** One HMAC key per caller (name -> env:NAME or file:/path); without any the trigger answers 404. */
  triggerKeys?: readonly TriggerKeySpec[];
  /** Where the trigger's and the leak endpoints' replay records live (inbound/replay-records.ts); required with triggerKeys or a policy `intake`. */
  stateDir?: string;
  /** env:NAME or file:/path of the bearer token that unlocks per-key series on /metrics; without it they are never served. */
  metricsTokenRef?: string;
  /** Connection cap and timeouts of the HTTP server (DEFAULT_HTTP_LIMITS). */
  http?: Partial<HttpLimits>;
  /** Refused triggers audited one by one per minute; the rest are summarized (DEFAULT_REJECTIONS_AUDITED_PER_MINUTE). */
  rejectionsAuditedPerMinute?: number;
  audit: AuditLog;
  metrics?: KeyrollMetrics;
  /** Overrides for every runtime the daemon builds (tests: credentials, apiBaseUrl, sleep, alerter, wrapBackend). */
  runtime?: Partial<Omit<RuntimeOptions, 'audit' | 'observer'>>;
  now?: () => Date;
  env?: NodeJS.ProcessEnv;
  /** Where start-up warnings go besides the audit trail (plain-HTTP endpoints); default stderr. */
  warn?: (line: string) => void;
}

export interface ShutdownResult {
  /** 0: every in-flight rotation finished; 3: the grace expired with work in flight. */
  exitCode: 0 | 3;
  /** Keys still rotating when the grace expired. */
  unfinished: string[];
}

export type ReloadResult = { ok: true; keys: number } | { ok: false; errorCode: string; error: string };

export interface Daemon {
  readonly url: string;
  readonly port: number;
  readonly metrics: KeyrollMetrics;
  policy(): Policy;
  readiness(): Readiness;
  schedules(): ScheduleInfo[];
  /** Reads every key's state and rotates those due (also runs every check interval). */
  sweep(): Promise<void>;
  /** Loads the policy file again; an invalid one keeps the current policy, is audited and alerts. */
  reload(): Promise<ReloadResult>;
  /** Stops scheduling, refuses triggers, lets in-flight rotations finish within the grace. Idempotent. */
  shutdown(signal?: string): Promise<ShutdownResult>;
  /** Resolves when no sweep, readiness check or rotation is in flight. */
  idle(): Promise<void>;
}

export async function startDaemon(options: DaemonOptions): Promise<Daemon> {
  const audit = options.audit;
  const now = options.now ?? (() => new Date());
  const env = options.env ?? process.env;
  const concurrency = options.concurrency ?? DAEMON_DEFAULTS.concurrency;
  const graceMs = options.graceMs ?? DAEMON_DEFAULTS.graceMs;
  const checkIntervalMs = options.checkIntervalMs ?? DAEMON_DEFAULTS.checkIntervalMs;
  const metrics = options.metrics ?? createMetrics({ now });
  const health = new KeyHealth(metrics, options.retryFailedAfterMs ?? DAEMON_DEFAULTS.retryFailedAfterMs);
  const shutdownController = new AbortController();
  // SIGTERM reaches every alert delivery too: a hanging sink gets a few seconds, then is abandoned
  // (audited), so the grace period holds whatever a sink does.
  const releaseDeliveries = abandonDeliveriesOn(shutdownController.signal);
  const work = new Set<Promise<unknown>>();
  const track = <T>(promise: Promise<T>): Promise<T> => {
    work.add(promise);
    const forget = (): void => {
      work.delete(promise);
    };
    promise.then(forget, forget);
    return promise;
  };
  const idle = async (): Promise<void> => {
    while (work.size > 0) await Promise.allSettled([...work]);
  };

  const reportFailure = (what: string, error: unknown, extra: Record<string, unknown> = {}): void => {
    audit.emit('daemon.failed', { what, errorCode: errorCode(error), message: errorMessage(error), ...extra });
  };

  let stopping = false;
  // Read through a function after an await: TypeScript would keep a narrowing from before it.
  const isStopping = (): boolean => stopping;
  let readiness: Readiness = { state: 'starting' };
  const triggerSpecs = options.triggerKeys ?? [];
  let triggerKeys: ReadonlyMap<string, Secret> | undefined = triggerSpecs.length > 0 ? await resolveTriggerKeys(triggerSpecs, env) : undefined;
  let metricsToken: Secret | undefined = options.metricsTokenRef ? await resolveRef(options.metricsTokenRef, env) : undefined;
  if (triggerKeys !== undefined && options.stateDir === undefined) {
    throw new UsageError('the trigger needs a state directory for its replay record (--state-dir)');
  }
  // One record per source (inbound/replay-records.ts), each opened before its endpoint serves:
  // no request is accepted that a restart could forget.
  const replays = options.stateDir === undefined ? undefined : new ReplayRecords(options.stateDir, () => Math.floor(now().getTime() / 1000));
  const triggerReplay = triggerKeys !== undefined ? await replays?.open('trigger') : undefined;
  const openIntakeReplays = async (policy: Policy): Promise<void> => {
    if (!intakeEnabled(policy)) return;
    if (replays === undefined) throw new UsageError('the leak intake needs a state directory for its replay record (--state-dir)');
    if (policy.intake?.github !== undefined) await replays.open('github');
    if (policy.intake?.gitguardian !== undefined) await replays.open('gitguardian');
  };
  const rejections = new RejectionAudit({
    audit: () => audit,
    perWindow: options.rejectionsAuditedPerMinute ?? DEFAULT_REJECTIONS_AUDITED_PER_MINUTE,
    nowMs: () => now().getTime(),
    counted: (why) => {
      metrics.recordTriggerRejection(why);
    },
  });

  const buildGeneration = async (policy: Policy): Promise<Generation> => {
    metrics.knowSinks(Object.keys(policy.alerts.sinks));
    const alerter =
      options.runtime?.alerter ??
      createAlerter({
        sinks: policy.alerts.sinks,
        audit,
        env,
        now,
        onResult: (sink, result) => {
          metrics.recordAlert(sink, result);
        },
      });
    const runtimeOptions: RuntimeOptions = { audit, env, now, ...options.runtime, observer: metrics.observer, alerter };
    const runtime = await createRuntime(policy, runtimeOptions);
    return new Generation(policy, runtime, (error) => {
      reportFailure('runtime-close', error);
    });
  };

  const launcher = new Launcher({
    locks: new KeyLocks(),
    concurrency,
    signal: shutdownController.signal,
    audit,
    track,
    onKeyDone: (outcome, trigger) => {
      // A drift probe that found the key healthy is not a rotation outcome.
      if (outcome.result === 'skipped' && outcome.detail === 'not-due') return;
      health.recordOutcome(outcome, trigger.reason, now().getTime(), stopping);
    },
  });
  const scheduled: RunTrigger = { reason: 'scheduled', force: false };

  let current = await buildGeneration(options.policy ?? (await loadPolicy(options.policyFile)));
  // Said once per endpoint for the daemon's life: at start, and for one a reloaded policy adds.
  const plainHttpAnnounced = new Set<string>();
  announcePlainHttp(current.policy.plainHttp ?? [], audit, plainHttpAnnounced, options.warn);
  let intakeSettings: IntakeRuntime;
  try {
    intakeSettings = await resolveIntake(current.policy, env);
    await openIntakeReplays(current.policy);
  } catch (error) {
    await current.retire();
    throw error;
  }

  const activate = (generation: Generation): void => {
    generation.startJobs(() =>
      startSchedules(groupSchedules(generation.policy.keys), {
        onTick: async (group) => {
          if (stopping || generation !== current) return;
          const keys = generation.policy.keys.filter((key) => group.keyIds.includes(key.id));
          const busy = await launcher.runFree(generation, keys, scheduled, 'schedule');
          for (const keyId of busy) audit.emit('key.skipped', { keyId, why: 'in-flight', schedule: group.pattern });
        },
        onError: (group, error) => {
          reportFailure('schedule-tick', error, { schedule: group.pattern });
        },
      }),
    );
  };

  /** Never rejects: an unexpected failure leaves the readiness as it was, and is reported. */
  const checkReadiness = async (generation: Generation): Promise<void> => {
    try {
      const result = await preflightDestinations(generation.runtime, generation.policy.keys, audit, now(), concurrency);
      if (generation === current && !isStopping()) readiness = result;
    } catch (error) {
      reportFailure('readiness-check', error);
    }
  };

  const sweeps = new SweepLoop({
    intervalMs: checkIntervalMs,
    track,
    onError: (error) => {
      reportFailure('sweep', error);
    },
    sweepOnce: async (recheckReadiness) => {
      const generation = current;
      const done = generation.use();
      try {
        if (recheckReadiness && readiness.state === 'preflight-failed') await checkReadiness(generation);
        const result = await checkKeys(generation.runtime, generation.policy.keys, now(), concurrency);
        if (generation !== current || isStopping()) return;
        health.recordSweep(result);
        const nowMs = now().getTime();
        const due = result.due.filter((key) => health.maySweep(key.id, nowMs));
        if (due.length > 0) await launcher.runFree(generation, due, scheduled, 'sweep');
        // Drift: every other key's stored secret is probed each sweep (a key rolled in the
        // dashboard is found within one sweep, alerted, and healed when onDrift is rotate).
        const probe = generation.policy.keys.filter((key) => !due.includes(key) && key.driftCheckMs !== undefined && health.maySweep(key.id, nowMs));
        if (probe.length > 0 && !isStopping()) await launcher.runFree(generation, probe, scheduled, 'drift');
      } finally {
        done();
      }
    },
  });

  const startTrigger = (keys: readonly KeyPolicy[], accepted: AcceptedTrigger, rotationIds: ReadonlyMap<string, string>, slots?: ReadonlyMap<string, string>): void => {
    const { request } = accepted;
    // The semantics of `keyroll rotate`: leak and compromise bypass the minimum interval.
    const urgent = isLeakReason(request.reason);
    // The actor is the caller whose key signed, never a name the body chose.
    const trigger: RunTrigger = { reason: request.reason, force: urgent, ignoreSchedule: true, actor: accepted.caller, ...(request.ticket ? { ticket: request.ticket } : {}) };
    void track(launcher.runAll(current, keys, trigger, rotationIds, slots ? { slots } : {}));
  };

  // A leak report rotates its key through the launcher like a trigger (key locks, shutdown
  // grace, the generation held open), the slot of a two-slot entry named, and waits for it.
  const rotateForLeak = (key: KeyPolicy, slot: string | undefined, trigger: RunTrigger, rotationId: string): Promise<KeyOutcome> => {
    let heard: KeyOutcome | undefined;
    return launcher
      .runAll(current, [key], trigger, new Map([[key.id, rotationId]]), {
        ...(slot === undefined ? {} : { slots: new Map([[key.id, slot]]) }),
        onKeyDone: (outcome) => {
          if (outcome.keyId === key.id) heard = outcome;
        },
      })
      .then(
        () => heard ?? { keyId: key.id, organizationId: key.organizationId, result: 'failed', detail: 'no-outcome', durationMs: 0, rolls: 0, rotationId },
        (): KeyOutcome => ({ keyId: key.id, organizationId: key.organizationId, result: 'failed', detail: 'launcher', durationMs: 0, rolls: 0, rotationId }),
      );
  };
  const leakIntake = new LeakIntake({
    policy: () => current.policy,
    runtime: () => current.runtime,
    alerter: () => current.runtime.alerter,
    audit: () => audit,
    rotate: rotateForLeak,
    onProvenDead: (ms) => {
      metrics.recordLeakDead(ms);
    },
  });
  const leakEndpoint = {
    rejections,
    now,
    audit: () => audit,
    alerter: () => current.runtime.alerter,
    accepting: () => !stopping,
    background: (work: Promise<void>) => {
      void track(work);
    },
    intake: leakIntake,
  };

  let server: DaemonServer;
  try {
    server = await startDaemonServer(
      options.listen,
      {
        readiness: () => readinessAnswer(stopping ? { state: 'shutting-down' } : readiness),
        metrics: async ({ authorization }) => {
          const access = metricsAccess(metricsToken, authorization);
          if (access === 'refused') return { status: 401, body: { error: { code: 'bad-token', message: 'the bearer token does not match' } } };
          return { contentType: metrics.registry.contentType, text: await metrics.exposition({ perKey: access === 'per-key' }) };
        },
        trigger: createTriggerEndpoint({
          keys: () => (triggerKeys === undefined ? undefined : lookupIn(triggerKeys)),
          replay: () => triggerReplay,
          rejections,
          now,
        audit: () => audit,
          accepting: () => !stopping,
          policyKeys: () => current.policy.keys,
          start: startTrigger,
        }),
        leakIntake: new Map([
          [GITHUB_LEAK_PATH, { maxBodyBytes: MAX_LEAK_WEBHOOK_BYTES, handle: createGithubEndpoint({ ...leakEndpoint, replay: () => replays?.get('github'), settings: () => intakeSettings.github, env }) }],
          [GITGUARDIAN_LEAK_PATH, { maxBodyBytes: MAX_LEAK_WEBHOOK_BYTES, handle: createGitguardianEndpoint({ ...leakEndpoint, replay: () => replays?.get('gitguardian'), settings: () => intakeSettings.gitguardian }) }],
        ]),
      },
      { ...DEFAULT_HTTP_LIMITS, ...options.http },
    );
  } catch (error) {
    await current.retire();
    throw error;
  }

  activate(current);
  audit.emit('daemon.started', {
    listen: `${options.listen.host.includes(':') ? `[${options.listen.host}]` : options.listen.host}:${server.port}`,
    file: current.policy.file,
    keys: current.policy.keys.length,
    schedules: groupSchedules(current.policy.keys).map((group) => ({ pattern: group.pattern, timezone: group.timezone, keys: group.keyIds.length })),
    checkIntervalMs,
    trigger: triggerKeys ? 'enabled' : 'disabled',
    ...(triggerKeys ? { callers: [...triggerKeys.keys()], stateDir: replays?.dir, replayRecord: triggerReplay?.origin } : {}),
    metrics: metricsToken ? 'per-key with token' : 'aggregate only',
    leakIntake: Object.keys(intakeSettings),
  });
  void track(
    (async () => {
      await checkReadiness(current);
      await sweeps.request(false);
      sweeps.scheduleNext();
    })(),
  );

  const reloadOnce = async (): Promise<ReloadResult> => {
    if (stopping) return { ok: false, errorCode: 'KR_DAEMON_STOPPING', error: 'the daemon is shutting down' };
    let next: Generation;
    let keys = triggerKeys;
    let token = metricsToken;
    let intake: IntakeRuntime;
    try {
      const policy = await loadPolicy(options.policyFile);
      intake = await resolveIntake(policy, env);
      await openIntakeReplays(policy);
      if (triggerSpecs.length > 0) keys = await resolveTriggerKeys(triggerSpecs, env);
      if (options.metricsTokenRef) token = await resolveRef(options.metricsTokenRef, env);
      next = await buildGeneration(policy);
    } catch (error) {
      audit.emit('policy.reload_failed', { file: options.policyFile, errorCode: errorCode(error), error: errorMessage(error) });
      await current.runtime.alerter.send({
        severity: 'error',
        summary: `keyroll daemon kept its current policy: reloading ${options.policyFile} failed: ${errorMessage(error)}`,
        // A fresh id per attempt: each failed reload alerts, none is deduplicated away.
        rotationId: randomUUID(),
        step: 'reload',
        errorCode: errorCode(error),
        nextAction: 'fix the policy file and send SIGHUP again; the current policy and schedules stay in force',
      });
      return { ok: false, errorCode: errorCode(error), error: errorMessage(error) };
    }
    if (isStopping()) {
      // Shutdown began while the new policy was loading: it never starts scheduling.
      await next.retire();
      return { ok: false, errorCode: 'KR_DAEMON_STOPPING', error: 'the daemon is shutting down' };
    }
    const previous = current;
    current = next;
    triggerKeys = keys;
    metricsToken = token;
    intakeSettings = intake;
    activate(next);
    for (const key of previous.policy.keys) if (!next.policy.keys.some((kept) => kept.id === key.id)) metrics.forgetKey(key.id);
    health.keepOnly(next.policy.keys);
    // Closed once its last in-flight run (holding it through Generation.use) is over.
    void track(previous.retire());
    audit.emit('policy.reloaded', { file: next.policy.file, keys: next.policy.keys.length, schedules: groupSchedules(next.policy.keys).length });
    announcePlainHttp(next.policy.plainHttp ?? [], audit, plainHttpAnnounced, options.warn);
    void track(checkReadiness(next).then(() => sweeps.request(false)));
    return { ok: true, keys: next.policy.keys.length };
  };
  let reloading: Promise<ReloadResult> = Promise.resolve({ ok: true, keys: current.policy.keys.length });

  const shutdown = async (signal: string): Promise<ShutdownResult> => {
    stopping = true;
    sweeps.stop();
    current.stopJobs();
    audit.emit('daemon.stopping', { signal, inFlight: launcher.inFlight(), graceMs });
    // Keys not started are skipped; a key past its roll finishes its store (rotateKey checks the
    // signal only before rolling).
    shutdownController.abort(new Error(`${signal}: shutting down`));
    let timer: NodeJS.Timeout | undefined;
    const finished = await Promise.race([
      idle().then(() => true),
      new Promise<false>((resolve) => {
        timer = setTimeout(() => {
          resolve(false);
        }, graceMs);
      }),
    ]);
    clearTimeout(timer);
    const unfinished = finished ? [] : launcher.inFlight();
    if (!finished) audit.emit('daemon.grace_expired', { inFlight: unfinished, graceMs });
    await server.close();
    rejections.flush();
    // With work still in flight the runtime stays open for it: the process is about to exit.
    if (finished) await current.retire();
    else void current.retire();
    releaseDeliveries();
    const result: ShutdownResult = { exitCode: finished ? 0 : 3, unfinished };
    audit.emit('daemon.stopped', { exitCode: result.exitCode, unfinished });
    return result;
  };
  let shutdownResult: Promise<ShutdownResult> | undefined;

  return {
    url: server.url,
    port: server.port,
    metrics,
    policy: () => current.policy,
    readiness: () => (stopping ? { state: 'shutting-down' } : readiness),
    schedules: () => current.jobs?.describe() ?? [],
    sweep: () => sweeps.request(),
    reload: () => {
      reloading = reloading.then(reloadOnce, reloadOnce);
      return reloading;
    },
    shutdown: (signal = 'shutdown') => (shutdownResult ??= shutdown(signal)),
    idle,
  };
}

/** Per-key series need the metrics token; a wrong token is refused rather than quietly answered with less. */
function metricsAccess(token: Secret | undefined, authorization: string | undefined): 'aggregate' | 'per-key' | 'refused' {
  if (authorization === undefined) return 'aggregate';
  if (token === undefined) return 'aggregate';
  const given = Buffer.from(/^Bearer (.+)$/i.exec(authorization.trim())?.[1] ?? '', 'utf8');
  const expected = Buffer.from(token.reveal(), 'utf8');
  return sameBytes(given, expected) ? 'per-key' : 'refused';
}
