// `keyroll daemon`: croner schedules from the policy, a sweep every check interval, the HTTP
// port (routes.ts: health, readiness, metrics, the signed trigger, the leak intake), SIGHUP
// reloads and a graceful shutdown that lets every rolled key finish its store (invariant 2 and
// 4: a secret is never abandoned between roll and store). Due-ness always comes from the
// backends' state, so a restarted daemon does not rotate again what its predecessor rotated.
// See docs/daemon.md.
//
// One Daemon is one running daemon: Daemon.start is its entry, its phase (starting, serving,
// reloading, shutting down) is one union with its transitions in ./state.ts, and the policy with
// everything built from it is one Generation (scheduler/generation.ts), swapped whole on reload.
// Work that awaited anything asks #isCurrent before it acts on what it found: a reload or a
// shutdown meanwhile makes its result stale.
import { randomUUID } from 'node:crypto';
import { abandonDeliveriesOn } from '../alerts/public/shutdown.ts';
import type { AuditLog } from '../audit/public/events.ts';
import { keyRecordsOf } from '../consumers/public/key-records.ts';
import type { DeliveryReport } from '../consumers/public/types.ts';
import { errorCode, errorMessage, typedCode } from '../errors.ts';
import { DEFAULT_REJECTIONS_AUDITED_PER_MINUTE, RejectionAudit } from '../inbound/public/rejection-audit.ts';
import { describeReplayStore } from '../inbound/public/replay-records.ts';
import type { KeyrollMetrics } from '../metrics/public/metrics.ts';
import { loadPolicy } from '../policy/public/load.ts';
import { announcePlainHttp } from '../policy/public/plain-http-notice.ts';
import type { Policy } from '../policy/public/schema.ts';
import type { RunTrigger } from '../rotation/public/types.ts';
import type { Generation } from '../scheduler/public/generation.ts';
import { KeyHealth } from '../scheduler/public/key-health.ts';
import { KeyLocks } from '../scheduler/public/key-locks.ts';
import { Launcher } from '../scheduler/public/launcher.ts';
import { preflightDestinations, type Readiness } from '../scheduler/public/readiness.ts';
import { groupSchedules, startSchedules, type ScheduleInfo } from '../scheduler/public/schedule.ts';
import { checkedSince, checkKeys, type KeyCheck } from '../scheduler/public/sweep.ts';
import { SweepLoop } from '../scheduler/public/sweep-loop.ts';
import type { EndpointSecrets } from './endpoint-secrets.ts';
import { DAEMON_DEFAULTS, type DaemonOptions, type ReloadResult, type ShutdownResult } from './options.ts';
import { daemonContext, prepare, reportFailure, type DaemonContext, type Prepared } from './prepare.ts';
import { Leadership } from './leadership.ts';
import { ReconcileLoop } from './reconcile-loop.ts';
import { daemonRoutes } from './routes.ts';
import { DaemonServer, DEFAULT_HTTP_LIMITS } from './server.ts';
import { DaemonState } from './state.ts';
import type { ObjectKeys } from './object-keys.ts';
import { narrowedGeneration } from './object-deletions.ts';
import { objectStatusReporter } from './object-status.ts';
import { observerCalls, type ObjectsObserver, type ObserverCalls } from './objects-observer.ts';

const SCHEDULED: RunTrigger = { reason: 'scheduled', force: false };
const STOPPING: ReloadResult = {
  ok: false,
  errorCode: 'KR_DAEMON_STOPPING',
  error: 'the daemon is shutting down',
};

export class Daemon {
  readonly metrics: KeyrollMetrics;
  readonly #context: DaemonContext;
  readonly #audit: AuditLog;
  readonly #now: () => Date;
  readonly #health: KeyHealth;
  readonly #shutdownController: AbortController;
  readonly #releaseDeliveries: () => void;
  /** Sweeps, readiness checks and rotations in flight: what a shutdown waits for. */
  readonly #work = new Set<Promise<unknown>>();
  readonly #launcher: Launcher;
  readonly #sweeps: SweepLoop;
  readonly #reconciles: ReconcileLoop;
  /** Whether this replica runs the work that must run once (always, without a Lease). */
  readonly #leadership: Leadership;
  readonly #rejections: RejectionAudit;
  readonly #server: DaemonServer;
  /** Plain-HTTP endpoints already named (#announcePlainHttp). */
  readonly #plainHttpAnnounced = new Set<string>();
  readonly #state: DaemonState<Generation, EndpointSecrets, ShutdownResult>;
  /** The queue of reloads, one after another: a queue, not a state (the phase says whether one runs). */
  #reloads: Promise<unknown> = Promise.resolve();
  /** With --keys-from kubernetes: the keyroll.io objects the policy is built from; absent: the policy file. */
  readonly #objects: ObjectKeys | undefined;
  /** The status writer's hook (keysFrom.observer); calls nothing without one. */
  readonly #tell: ObserverCalls;
  /** The leadership term whose first drift run was decided (#probedByPredecessor). */
  #driftTerm: AbortSignal | undefined;

  /**
   * Loads the policy (unless given), reads every secret the endpoints need, builds the first
   * generation and listens; then schedules, checks readiness and sweeps once. Any failure before
   * it listens throws with nothing left running (the CLI exits 2 for a configuration error).
   */
  static async start(options: DaemonOptions): Promise<Daemon> {
    const context = daemonContext(options);
    const objects = await startObjectKeys(context);
    let first: Prepared;
    try {
      first = await prepare(
        context,
        objects === undefined
          ? (options.policy ?? (await loadPolicy(options.policyFile)))
          : await objects.load(),
      );
    } catch (error) {
      await objects?.stop();
      throw error;
    }
    const daemon = new Daemon(context, first, objects);
    daemon.#announcePlainHttp(daemon.#state.generation.policy);
    try {
      await daemon.#server.listen(options.listen);
    } catch (error) {
      await objects?.stop();
      await daemon.#state.generation.retire();
      daemon.#releaseDeliveries();
      throw error;
    }
    daemon.#begin();
    return daemon;
  }

  private constructor(context: DaemonContext, first: Prepared, objects: ObjectKeys | undefined) {
    const { options, audit, now } = context;
    const observer = this.#observerOf(context, objects);
    objects?.observe(observer);
    const tell = observerCalls(audit, observer);
    this.#context = context;
    this.#objects = objects;
    this.#tell = tell;
    this.#audit = audit;
    this.#now = now;
    this.metrics = context.metrics;
    this.#shutdownController = context.shutdown;
    this.#health = new KeyHealth(
      this.metrics,
      options.retryFailedAfterMs ?? DAEMON_DEFAULTS.retryFailedAfterMs,
    );
    // SIGTERM reaches every alert delivery too: a hanging sink gets a few seconds, then is abandoned
    // (audited), so the grace period holds whatever a sink does.
    this.#releaseDeliveries = abandonDeliveriesOn(this.#shutdownController.signal);
    this.#state = new DaemonState({ generation: first.generation, secrets: first.secrets });
    const track = <T>(work: Promise<T>): Promise<T> => this.#track(work);
    this.#launcher = new Launcher({
      locks: new KeyLocks(),
      concurrency: context.concurrency,
      signal: this.#shutdownController.signal,
      audit,
      track,
      onKeyDone: (outcome, trigger) => {
        tell.keyOutcome(outcome, trigger);
        // A drift probe that found the key healthy is not a rotation outcome.
        if (outcome.result === 'skipped' && outcome.detail === 'not-due') return;
        // A key left unstarted because this replica stopped leading is the next leader's, not a
        // failure to back off from (were this replica to lead again).
        const stopped =
          !this.#accepting() || (outcome.result === 'aborted' && outcome.detail === 'lost-leadership');
        this.#health.recordOutcome(outcome, trigger.reason, now().getTime(), stopped);
      },
      // Not shutdown work: a rollout may take minutes. Restarts not done when the daemon stops
      // stay recorded on their workloads (keyroll.io/restart-owed) for the next sweep.
      deliver: (delivery) => {
        this.#takeDelivery(delivery);
      },
    });
    this.#sweeps = new SweepLoop({
      intervalMs: context.checkIntervalMs,
      track,
      onError: (error) => {
        reportFailure(audit, 'sweep', error);
      },
      sweepOnce: (recheckReadiness) => this.#sweepOnce(recheckReadiness),
    });
    this.#rejections = new RejectionAudit({
      audit: () => audit,
      perWindow: options.rejectionsAuditedPerMinute ?? DEFAULT_REJECTIONS_AUDITED_PER_MINUTE,
      nowMs: () => now().getTime(),
      counted: (why) => {
        this.metrics.recordTriggerRejection(why);
      },
    });
    const endpoints = daemonRoutes({
      audit,
      now,
      env: context.env,
      metrics: this.metrics,
      rejections: this.#rejections,
      replays: context.replays,
      launcher: this.#launcher,
      current: () => this.#state.generation,
      secrets: () => this.#state.secrets,
      readiness: () => this.readiness(),
      accepting: () => this.#accepting(),
      track,
    });
    this.#server = new DaemonServer(endpoints.routes, { ...DEFAULT_HTTP_LIMITS, ...options.http });
    this.#reconciles = new ReconcileLoop({
      // The reconcile is leader work (issue 30): a follower's pass is a no-op, and the one after
      // it becomes leader runs at once (onElected below).
      reconcileOnce: () => (this.#leadership.leads() ? endpoints.reconcileGithub() : Promise.resolve()),
      intervalMs: () => this.#state.secrets.intake.github?.reconcile?.intervalMs,
      track,
      onError: (error) => {
        reportFailure(audit, 'leak-reconcile', error);
      },
    });
    this.#leadership = this.#leadershipOf(context);
  }

  /** A run's consumer delivery, in the background: its counts go to the observer, a failure is reported. */
  #takeDelivery(delivery: Promise<DeliveryReport | undefined>): void {
    delivery.then(
      (report) => {
        this.#tell.consumers(report);
      },
      (error: unknown) => {
        reportFailure(this.#audit, 'consumers', error);
      },
    );
  }

  /** With keys from objects: the given observer, else the status writer (unless writeStatus is false). */
  #observerOf(context: DaemonContext, objects: ObjectKeys | undefined): ObjectsObserver | undefined {
    const keysFrom = context.options.keysFrom;
    if (objects === undefined || keysFrom === undefined) return undefined;
    if (keysFrom.observer !== undefined || keysFrom.writeStatus === false) return keysFrom.observer;
    return objectStatusReporter({
      keysFrom,
      objects,
      audit: context.audit,
      now: context.now,
      generation: () => this.#state.generation,
      launcher: () => this.#launcher,
    });
  }

  /** The Lease (or none): each change is told to the observer; a new term starts its work at once. */
  #leadershipOf(context: DaemonContext): Leadership {
    const onElected = (): void => {
      this.#tell.leadership(true);
      // client-go's OnStartedLeading: whatever a lost predecessor left (due keys, intent markers,
      // open alerts) is looked at now, not one interval later.
      if (!this.#accepting()) return;
      void this.#sweeps.request();
      void this.#reconciles.request();
    };
    return new Leadership(context.options.leaderElection, context.audit, this.metrics, onElected, () => {
      this.#tell.leadership(false);
    });
  }

  /** http://host:port as reachable from this machine. */
  get url(): string {
    return this.#server.url;
  }

  get port(): number {
    return this.#server.port;
  }

  policy(): Policy {
    return this.#state.generation.policy;
  }

  readiness(): Readiness {
    return this.#state.readiness();
  }

  schedules(): ScheduleInfo[] {
    return this.#state.generation.jobs?.describe() ?? [];
  }

  /** Reads every key's state and rotates those due (also runs every check interval). */
  sweep(): Promise<void> {
    return this.#sweeps.request();
  }

  /**
   * Lists the open leak alerts at the scanner and handles those no webhook brought (also runs at
   * start and every intake.github.reconcileInterval; docs/daemon.md, "Reconcile").
   */
  reconcileLeaks(): Promise<void> {
    return this.#reconciles.request();
  }

  /**
   * Loads the policy file again (with keys from objects: the settings file, and builds from the
   * objects held); an invalid one keeps the current policy, is audited and alerts. Reloads run one
   * after another.
   */
  reload(): Promise<ReloadResult> {
    const objects = this.#objects;
    return this.#queueReload(() =>
      objects === undefined ? loadPolicy(this.#context.options.policyFile) : objects.load(),
    );
  }

  /** `load` runs when the reloads queued before it are over; undefined: nothing changed, nothing swapped. */
  #queueReload(load: () => Promise<Policy | undefined>): Promise<ReloadResult> {
    const reloadOnce = (): Promise<ReloadResult> => this.#reloadOnce(load);
    const reloaded = this.#reloads.then(reloadOnce, reloadOnce);
    this.#reloads = reloaded;
    return reloaded;
  }

  /** Stops scheduling, refuses triggers, lets in-flight rotations finish within the grace. Idempotent. */
  shutdown(signal = 'shutdown'): Promise<ShutdownResult> {
    return this.#state.shutDown(() => this.#shutdownOnce(signal));
  }

  /** Resolves when no sweep, readiness check or rotation is in flight. */
  async idle(): Promise<void> {
    while (this.#work.size > 0) await Promise.allSettled([...this.#work]);
  }

  /** Still the generation in force, and no shutdown began: what a step found after an await may be acted on. */
  #isCurrent(generation: Generation): boolean {
    return this.#state.isCurrent(generation);
  }

  #track<T>(promise: Promise<T>): Promise<T> {
    this.#work.add(promise);
    const forget = (): void => {
      this.#work.delete(promise);
    };
    promise.then(forget, forget);
    return promise;
  }

  /** Names each endpoint the policy lets use plain HTTP, once for the daemon's life (a reload names only new ones). */
  #announcePlainHttp(policy: Policy): void {
    announcePlainHttp(
      policy.plainHttp ?? [],
      this.#audit,
      this.#plainHttpAnnounced,
      this.#context.options.warn,
    );
  }

  #begin(): void {
    const { options, replays } = this.#context;
    const { generation, secrets } = this.#state;
    const { triggerKeys, metricsToken, intake } = secrets;
    this.#state.serve();
    this.#activate(generation);
    this.#objects?.inForce(generation.policy);
    // Each change of the objects builds at the head of the reload queue, from the objects held then.
    const objects = this.#objects;
    if (objects !== undefined)
      objects.listen(() => {
        void this.#queueReload(() => Promise.resolve(objects.rebuild()));
      });
    this.#leadership.start();
    // Without a Lease this daemon leads from its start, and alone.
    if (!this.#leadership.elected) this.#tell.leadership(true);
    this.#audit.emit('daemon.started', {
      listen: `${options.listen.host.includes(':') ? `[${options.listen.host}]` : options.listen.host}:${this.port}`,
      file: generation.policy.file,
      keys: generation.policy.keys.length,
      schedules: groupSchedules(generation.policy.keys).map((group) => ({
        pattern: group.pattern,
        timezone: group.timezone,
        keys: group.keyIds.length,
      })),
      checkIntervalMs: this.#context.checkIntervalMs,
      trigger: triggerKeys ? 'enabled' : 'disabled',
      ...(triggerKeys
        ? {
            callers: [...triggerKeys.keys()],
            stateDir: replays?.dir,
            replayRecord: replays?.get('trigger')?.origin,
          }
        : {}),
      ...(replays === undefined ? {} : { replayStore: describeReplayStore(replays.store) }),
      metrics: metricsToken ? 'per-key with token' : 'aggregate only',
      leakIntake: Object.keys(intake),
      leaderElection: this.#leadership.elected ? 'lease' : 'off',
      ...(this.#objects === undefined ? {} : { keysFrom: 'kubernetes' }),
    });
    void this.#track(
      (async () => {
        await this.#checkReadiness(generation);
        await this.#sweeps.request(false);
        this.#sweeps.scheduleNext();
      })(),
    );
    // Beside the first sweep, not after it: a leak whose delivery was lost while the daemon was
    // down waits for nothing else.
    void this.#reconciles.request().finally(() => {
      this.#reconciles.scheduleNext();
    });
  }

  #activate(generation: Generation): void {
    generation.startJobs(() =>
      startSchedules(groupSchedules(generation.policy.keys), {
        onTick: async (group) => {
          if (!this.#isCurrent(generation) || !this.#leadership.leads()) return;
          const keys = generation.policy.keys.filter((key) => group.keyIds.includes(key.id));
          const busy = await this.#launcher.runFree(
            generation,
            keys,
            SCHEDULED,
            'schedule',
            this.#leadership.termSignal(),
          );
          for (const keyId of busy)
            this.#audit.emit('key.skipped', { keyId, why: 'in-flight', schedule: group.pattern });
        },
        onError: (group, error) => {
          reportFailure(this.#audit, 'schedule-tick', error, { schedule: group.pattern });
        },
      }),
    );
  }

  /** Never rejects: an unexpected failure leaves the readiness as it was, and is reported. */
  async #checkReadiness(generation: Generation): Promise<void> {
    try {
      const result = await preflightDestinations(
        generation.runtime,
        generation.policy.keys,
        this.#audit,
        this.#now(),
        this.#context.concurrency,
      );
      this.#state.checked(generation, result);
    } catch (error) {
      reportFailure(this.#audit, 'readiness-check', error);
    }
  }

  async #sweepOnce(recheckReadiness: boolean): Promise<void> {
    const generation = this.#state.generation;
    const done = generation.use();
    try {
      if (recheckReadiness && this.#state.readiness().state === 'preflight-failed')
        await this.#checkReadiness(generation);
      // Readiness is every replica's (it decides whether the Service sends it webhooks); the rest
      // of the sweep is the leader's alone.
      if (!this.#leadership.leads()) return;
      const result = await checkKeys(
        generation.runtime,
        generation.policy.keys,
        this.#now(),
        this.#context.concurrency,
      );
      if (!this.#isCurrent(generation)) return;
      this.#health.recordSweep(result);
      const nowMs = this.#now().getTime();
      const due = result.due.filter((key) => this.#health.maySweep(key.id, nowMs));
      if (due.length > 0 && this.#leadership.leads())
        await this.#launcher.runFree(generation, due, SCHEDULED, 'sweep', this.#leadership.termSignal());
      // Drift: every other key's stored secret is probed each sweep (a key rolled in the
      // dashboard is found within one sweep, alerted, and healed when onDrift is rotate).
      const probed = this.#probedByPredecessor(result.checks, nowMs);
      const probe = generation.policy.keys.filter(
        (key) =>
          !due.includes(key) &&
          key.driftCheckMs !== undefined &&
          !probed.has(key.id) &&
          this.#health.maySweep(key.id, nowMs),
      );
      if (probe.length > 0 && this.#accepting() && this.#leadership.leads())
        await this.#launcher.runFree(generation, probe, SCHEDULED, 'drift', this.#leadership.termSignal());
      // Restarts still owed (a runner stopped before them, or they waited for the window): in the
      // background, like every delivery.
      if (this.#accepting() && this.#leadership.leads()) {
        generation.refresher
          ?.pickUpOwed(generation.policy.keys, this.#audit, keyRecordsOf(generation.runtime, this.#now))
          .catch((error: unknown) => {
            reportFailure(this.#audit, 'consumers', error);
          });
      }
    } finally {
      done();
    }
  }

  /**
   * On a new leader's first sweep of its term: the keys a predecessor probed or rotated within the
   * last check interval, which this drift run leaves out. The dead leader's last sweep probed
   * every key moments ago; probing them all again at once would only compete with the leak
   * reports a takeover is busiest with (the `ha` bench's slowest delivered leaks were the ones a new
   * leader took in its first seconds, while it probed every key).
   * Each key is still probed at least once per check interval. Empty outside an election.
   */
  #probedByPredecessor(checks: readonly KeyCheck[], nowMs: number): Set<string> {
    const term = this.#leadership.termSignal();
    if (term === undefined || term === this.#driftTerm) return new Set();
    this.#driftTerm = term;
    return checkedSince(checks, nowMs - this.#context.checkIntervalMs);
  }

  #accepting(): boolean {
    return this.#state.accepting();
  }

  async #reloadOnce(load: () => Promise<Policy | undefined>): Promise<ReloadResult> {
    if (!this.#state.beginReload()) return STOPPING;
    const { audit } = this.#context;
    let next: Prepared;
    try {
      const policy = await load();
      if (policy === undefined) {
        // Built from the objects and equal to the policy in force: nothing to swap.
        this.#state.endReload();
        return { ok: true, keys: this.#state.generation.policy.keys.length };
      }
      next = await prepare(this.#context, policy);
    } catch (error) {
      // The current policy stays in force (a shutdown meanwhile keeps its phase), without the
      // keys whose RotatedKey was deleted: a deletion takes effect whatever else failed.
      const previous = this.#state.generation;
      const narrowed = this.#withoutDeletedKeys(previous);
      if (this.#state.endReload(narrowed) && narrowed !== undefined) {
        previous.stopJobs();
        this.#takeOver(previous, narrowed.generation);
        this.#objects?.inForce(narrowed.generation.policy);
      }
      await this.#reloadFailed(error);
      return { ok: false, errorCode: errorCode(error), error: errorMessage(error) };
    }
    const previous = this.#state.generation;
    if (!this.#state.endReload(next)) {
      // Shutdown began while the new policy was loading: it never starts scheduling.
      await next.generation.retire();
      return STOPPING;
    }
    const { generation } = next;
    this.#takeOver(previous, generation);
    // Closed once its last in-flight run (holding it through Generation.use) is over.
    void this.#track(previous.retire());
    audit.emit('policy.reloaded', {
      file: generation.policy.file,
      keys: generation.policy.keys.length,
      schedules: groupSchedules(generation.policy.keys).length,
      ...(this.#objects === undefined ? {} : { keysFrom: 'kubernetes' }),
    });
    this.#objects?.inForce(generation.policy);
    this.#announcePlainHttp(generation.policy);
    void this.#track(this.#checkReadiness(generation).then(() => this.#sweeps.request(false)));
    // The places to list or the interval may have changed: reconcile now, then on the new interval.
    void this.#reconciles.request().finally(() => {
      this.#reconciles.scheduleNext();
    });
    return { ok: true, keys: generation.policy.keys.length };
  }

  /** What every swap starts and forgets: the new generation's schedules, the keys it no longer has. */
  #takeOver(previous: Generation, generation: Generation): void {
    this.#activate(generation);
    for (const key of previous.policy.keys)
      if (!generation.policy.keys.some((kept) => kept.id === key.id)) this.metrics.forgetKey(key.id);
    this.#health.keepOnly(generation.policy.keys);
  }

  /**
   * With keys from objects, after a failed build: the generation in force without the keys whose
   * RotatedKey was deleted, on its runtime and with its endpoint secrets (object-deletions.ts);
   * undefined when no key in force lost its object.
   */
  #withoutDeletedKeys(inForce: Generation): Prepared | undefined {
    const policy = this.#objects?.withoutDeleted(inForce.policy);
    if (policy === undefined) return undefined;
    const generation = narrowedGeneration(inForce, policy, (error) => {
      reportFailure(this.#audit, 'runtime-close', error);
    });
    return { generation, secrets: this.#state.secrets };
  }

  /** A reload that failed: audited and alerted; the policy in force stays. */
  async #reloadFailed(error: unknown): Promise<void> {
    const file = this.#context.options.policyFile;
    const fromObjects = this.#objects !== undefined;
    this.#audit.emit('policy.reload_failed', {
      file,
      ...(fromObjects ? { keysFrom: 'kubernetes' } : {}),
      errorCode: errorCode(error),
      error: errorMessage(error),
    });
    await this.#state.generation.runtime.alerter.send({
      severity: 'error',
      summary: fromObjects
        ? `keyroll daemon kept its current keys: building the policy from keyroll.io objects (settings ${file}) failed: ${errorMessage(error)}`
        : `keyroll daemon kept its current policy: reloading ${file} failed: ${errorMessage(error)}`,
      // A fresh id per attempt: each failed reload alerts, none is deduplicated away.
      rotationId: randomUUID(),
      step: 'reload',
      ...typedCode(error),
      nextAction: fromObjects
        ? 'fix the object or the settings file the error names (the next change of an object, or SIGHUP, builds again); the keys and schedules in force stay'
        : 'fix the policy file and send SIGHUP again; the current policy and schedules stay in force',
    });
  }

  /** Runs once, in the shutting-down phase (DaemonState.shutDown). */
  async #shutdownOnce(signal: string): Promise<ShutdownResult> {
    // No object change starts a reload from now (a reload queued already answers STOPPING).
    const watching = this.#objects?.stop();
    this.#sweeps.stop();
    this.#reconciles.stop();
    this.#state.generation.stopJobs();
    this.#audit.emit('daemon.stopping', {
      signal,
      inFlight: this.#launcher.inFlight(),
      graceMs: this.#context.graceMs,
    });
    // Hand the Lease over now, not after the grace: the next leader may start its sweep while our
    // last rotations finish their store, and the backend key lock keeps the two apart (invariant 5).
    const released = this.#leadership.release();
    // Keys not started are skipped; a key past its roll finishes its store (rotateKey checks the
    // signal only before rolling).
    this.#shutdownController.abort(new Error(`${signal}: shutting down`));
    let timer: NodeJS.Timeout | undefined;
    const finished = await Promise.race([
      this.idle().then(() => true),
      new Promise<false>((resolve) => {
        timer = setTimeout(() => {
          resolve(false);
        }, this.#context.graceMs);
      }),
    ]);
    clearTimeout(timer);
    const unfinished = finished ? [] : this.#launcher.inFlight();
    if (!finished)
      this.#audit.emit('daemon.grace_expired', { inFlight: unfinished, graceMs: this.#context.graceMs });
    await this.#server.close();
    await released;
    await watching;
    this.#rejections.flush();
    // With work still in flight the runtime stays open for it: the process is about to exit.
    if (finished) await this.#state.generation.retire();
    else void this.#state.generation.retire();
    this.#releaseDeliveries();
    const result: ShutdownResult = { exitCode: finished ? 0 : 3, unfinished };
    this.#audit.emit('daemon.stopped', { exitCode: result.exitCode, unfinished });
    return result;
  }
}

/** With options.keysFrom: watches the keyroll.io objects, resolving once each kind was listed. */
async function startObjectKeys(context: DaemonContext): Promise<ObjectKeys | undefined> {
  const { keysFrom, policyFile } = context.options;
  if (keysFrom === undefined) return undefined;
  // Loaded only in this mode: the daemon of a policy file never loads the keyroll.io kinds.
  const { ObjectKeys: Keys } = await import('./object-keys.ts');
  return Keys.start(keysFrom, context.audit, policyFile, context.shutdown.signal);
}
