// Starting rotations in the daemon: every run goes through here, so every run takes the per-key
// locks, holds its generation open, gets the shutdown signal, reports each key's outcome, and
// hands what it stored to the generation's consumers' refresh (in the background: a rollout may
// take minutes, and neither the key locks nor the next sweep wait for it).
// Schedule ticks and sweeps run the keys that are free now, each key's hold starting with its own
// work (a trigger takes over the ones not started yet); a trigger also waits for the busy ones,
// each in its own run as soon as its key is free.
import { randomUUID } from 'node:crypto';
import type { AuditLog } from '../audit/public/events.ts';
import type { ConsumerRefresher } from '../consumers/public/refresher.ts';
import type { DeliveryReport } from '../consumers/public/types.ts';
import { errorCode, errorMessage, typedCode } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { keyOutcome, notStartedFacts } from '../rotation/public/outcome.ts';
import { runRotations } from '../rotation/public/run.ts';
import type { KeyOutcome, RunTrigger } from '../rotation/public/types.ts';
import { inSpan } from '../tracing/public/spans.ts';
import { LauncherError } from './errors.ts';
import type { Generation } from './generation.ts';
import type { KeyLocks, ReleaseKey, Reservation } from './key-locks.ts';

type ConsumerDelivery = ReturnType<ConsumerRefresher['begin']>;

export interface LauncherOptions {
  locks: KeyLocks;
  concurrency: number;
  /** Aborted at shutdown: keys not started are skipped, rolled ones finish their store. */
  signal: AbortSignal;
  audit: AuditLog;
  onKeyDone: (outcome: KeyOutcome, trigger: RunTrigger) => void;
  /** Registers work a shutdown waits for. */
  track: <T>(work: Promise<T>) => Promise<T>;
  /** Takes a run's consumer delivery once its rotations are over (runs in the background; never rejects). */
  deliver?: (delivery: Promise<DeliveryReport | undefined>) => void;
}

/** What a trigger run may add: the slot to roll per entry id, and a listener for each key's outcome. */
export interface RunExtras {
  slots?: ReadonlyMap<string, string>;
  onKeyDone?: (outcome: KeyOutcome) => void;
  /**
   * Asked once a busy key is this run's (a leak: is the leaked value still alive?): the rotation
   * that held the key may have made this one needless. False skips the key as `already-dead`.
   */
  stillNeeded?: (key: KeyPolicy) => Promise<boolean>;
}

/** `drift`: the sweep's probe of keys that are not due (every sweep: a dead stored secret is found within one). */
export type RunSource = 'schedule' | 'sweep' | 'trigger' | 'drift';

export class Launcher {
  readonly #options: LauncherOptions;
  /** Keys whose rotation has begun and not ended (a run's queued keys are not in it yet). */
  readonly #started = new Map<string, number>();

  constructor(options: LauncherOptions) {
    this.#options = options;
  }

  /** Key ids being rotated right now: what a shutdown waits for. */
  inFlight(): string[] {
    return [...this.#started.keys()].sort();
  }

  /**
   * Runs the keys that are free now; the rest are left to their next tick or sweep. Returns the keys
   * skipped as busy. `stop` (a leader's term) ends the run's key starts as the shutdown does.
   */
  async runFree(
    generation: Generation,
    keys: readonly KeyPolicy[],
    trigger: RunTrigger,
    source: RunSource,
    stop?: AbortSignal,
  ): Promise<string[]> {
    // Reserved, not held: a key's hold starts when its own work does (mayStart), so a leak for a
    // key still queued in this run takes it over at once instead of waiting for the whole run.
    const reserved = new Map<string, Reservation>();
    const busy: string[] = [];
    for (const key of keys) {
      const reservation = this.#options.locks.reserve(key.id);
      if (reservation) reserved.set(key.id, reservation);
      else busy.push(key.id);
    }
    const held = new Map([...reserved].map(([keyId, reservation]) => [keyId, reservation.release]));
    const mayStart = (key: KeyPolicy): boolean => reserved.get(key.id)?.start() ?? false;
    const free = keys.filter((key) => held.has(key.id));
    if (free.length > 0)
      await this.#options.track(
        this.#runHeld(generation, free, held, trigger, source, undefined, { mayStart }, stop),
      );
    return busy;
  }

  /**
   * Runs every key: the free ones at once, each busy one as soon as its current rotation ends.
   * `extra.slots` names the slot to roll of two-slot entries (a leak of one slot), and
   * `extra.onKeyDone` hears each key's outcome (leak intake waits for its key's).
   */
  async runAll(
    generation: Generation,
    keys: readonly KeyPolicy[],
    trigger: RunTrigger,
    rotationIds: ReadonlyMap<string, string>,
    extra: RunExtras = {},
  ): Promise<void> {
    const done = generation.use();
    try {
      const held = new Map<string, ReleaseKey>();
      const waiting: KeyPolicy[] = [];
      for (const key of keys) {
        const release = this.#options.locks.tryAcquire(key.id);
        if (release) held.set(key.id, release);
        else waiting.push(key);
      }
      const runs: Promise<void>[] = [];
      const free = keys.filter((key) => held.has(key.id));
      if (free.length > 0)
        runs.push(this.#runHeld(generation, free, held, trigger, 'trigger', rotationIds, extra));
      for (const key of waiting) runs.push(this.#runWhenFree(generation, key, trigger, rotationIds, extra));
      await this.#options.track(Promise.all(runs));
    } finally {
      done();
    }
  }

  /**
   * Runs one key as `runAll` does (at once, or as soon as it is free) and resolves with the outcome
   * its run reported for it. Rejects with a LauncherError when the run gave none (it stopped
   * unexpectedly: its own alert says why) or the launcher threw; it never makes an outcome up.
   */
  async runOne(
    generation: Generation,
    key: KeyPolicy,
    trigger: RunTrigger,
    rotationId: string,
    extra: { slot?: string; stillNeeded?: (key: KeyPolicy) => Promise<boolean> } = {},
  ): Promise<KeyOutcome> {
    let heard: KeyOutcome | undefined;
    try {
      await this.runAll(generation, [key], trigger, new Map([[key.id, rotationId]]), {
        ...(extra.slot === undefined ? {} : { slots: new Map([[key.id, extra.slot]]) }),
        ...(extra.stillNeeded === undefined ? {} : { stillNeeded: extra.stillNeeded }),
        onKeyDone: (outcome) => {
          if (outcome.keyId === key.id) heard = outcome;
        },
      });
    } catch (error) {
      throw new LauncherError(
        'KR_LAUNCHER_FAILED',
        key.id,
        `the launcher failed running key ${key.id}: ${errorMessage(error)}`,
        error,
      );
    }
    if (heard === undefined)
      throw new LauncherError(
        'KR_LAUNCHER_NO_OUTCOME',
        key.id,
        `the run of key ${key.id} stopped without its outcome`,
      );
    return heard;
  }

  async #runWhenFree(
    generation: Generation,
    key: KeyPolicy,
    trigger: RunTrigger,
    rotationIds: ReadonlyMap<string, string>,
    extra: RunExtras,
  ): Promise<void> {
    let release: ReleaseKey;
    try {
      release = await this.#options.locks.acquire(key.id, this.#options.signal);
    } catch {
      // Shutdown came while the key was busy: the promised rotation never started.
      const rotationId = rotationIds.get(key.id);
      this.#auditFor(trigger).emit('key.skipped', {
        keyId: key.id,
        organizationId: key.organizationId,
        ...(rotationId ? { rotationId } : {}),
        why: 'shutdown',
      });
      const aborted = keyOutcome(
        { ...notStartedFacts(key), ...(rotationId ? { rotationId } : {}) },
        { result: 'aborted', detail: 'shutdown' },
      );
      this.#options.onKeyDone(aborted, trigger);
      extra.onKeyDone?.(aborted);
      return;
    }
    // A leak for a key whose roll was under way waited for it; the value it reports is then
    // usually dead already, and a leak for a value already dead costs no roll.
    if (extra.stillNeeded !== undefined && !(await extra.stillNeeded(key).catch(() => true))) {
      release();
      const rotationId = rotationIds.get(key.id);
      this.#auditFor(trigger).emit('key.skipped', {
        keyId: key.id,
        organizationId: key.organizationId,
        ...(rotationId ? { rotationId } : {}),
        why: 'already-rotated',
      });
      const needless = keyOutcome(
        { ...notStartedFacts(key), ...(rotationId ? { rotationId } : {}) },
        { result: 'skipped', detail: 'already-dead' },
      );
      this.#options.onKeyDone(needless, trigger);
      extra.onKeyDone?.(needless);
      return;
    }
    await this.#runHeld(
      generation,
      [key],
      new Map([[key.id, release]]),
      trigger,
      'trigger',
      rotationIds,
      extra,
    );
  }

  // eslint-disable-next-line max-lines-per-function -- a held run's whole life in order (each key's hold, the leak's re-check, the run, the releases), so every early exit releases what it holds
  async #runHeld(
    generation: Generation,
    keys: readonly KeyPolicy[],
    held: Map<string, ReleaseKey>,
    trigger: RunTrigger,
    source: RunSource,
    rotationIds?: ReadonlyMap<string, string>,
    extra: RunExtras & { mayStart?: (key: KeyPolicy) => boolean } = {},
    stop?: AbortSignal,
  ): Promise<void> {
    let done: () => void;
    try {
      done = generation.use();
    } catch (error) {
      // Nothing started: the keys this run was handed are free again before the caller hears.
      for (const release of held.values()) release();
      throw error;
    }
    const began = new Set<string>();
    // runRotations tells when a key's own work starts (after mayStart): in flight from then on.
    const started = (keyId: string): void => {
      began.add(keyId);
      this.#started.set(keyId, (this.#started.get(keyId) ?? 0) + 1);
    };
    const ended = (keyId: string): void => {
      if (!began.delete(keyId)) return;
      const count = (this.#started.get(keyId) ?? 1) - 1;
      if (count > 0) this.#started.set(keyId, count);
      else this.#started.delete(keyId);
    };
    // A trace of its own per run when tracing is on (docs/tracing.md): a schedule tick, a sweep, a
    // drift probe or a trigger. A leak report's run joins the report's trace (leaks/intake.ts).
    const traced = <T>(work: () => Promise<T>): Promise<T> =>
      inSpan(
        `keyroll daemon ${source}`,
        {
          'keyroll.command': 'daemon',
          'keyroll.run.source': source,
          'keyroll.reason': trigger.reason,
          'keyroll.keys': keys.length,
        },
        work,
        source === 'trigger' ? 'active' : 'new-trace',
      );
    let delivery: ConsumerDelivery | undefined;
    try {
      // Inside the try: a refresher that throws is a stopped run like any other, and the finally
      // still frees the keys and the generation (outside it, they stayed held for good).
      delivery = generation.refresher?.begin(this.#auditFor(trigger), generation.policy.keys);
      await traced(() =>
        runRotations(generation.runtime, {
          keys,
          trigger,
          concurrency: this.#options.concurrency,
          signal: stop === undefined ? this.#options.signal : AbortSignal.any([this.#options.signal, stop]),
          command: `daemon ${source}`,
          driftCheck: source === 'drift' ? 'every-run' : 'policy',
          ...(rotationIds ? { rotationIds } : {}),
          ...(extra.slots ? { slots: extra.slots } : {}),
          ...(extra.mayStart ? { mayStart: extra.mayStart } : {}),
          onKeyStarted: started,
          // A single key's webhook consumers hear of it at the store (invariant 12).
          onKeyStored: (outcome) => {
            const key = keys.find((candidate) => candidate.id === outcome.keyId);
            if (key !== undefined) delivery?.storedBeforeVerify(key, outcome);
          },
          onKeyDone: (outcome) => {
            // The key is free as soon as its own rotation is over, not when the whole run is.
            ended(outcome.keyId);
            held.get(outcome.keyId)?.();
            const key = keys.find((candidate) => candidate.id === outcome.keyId);
            if (key !== undefined) delivery?.stored(key, outcome);
            this.#options.onKeyDone(outcome, trigger);
            extra.onKeyDone?.(outcome);
          },
        }),
      );
      if (delivery !== undefined) this.#options.deliver?.(delivery.finish());
    } catch (error) {
      // runRotations reports per-key failures itself; reaching here is a bug, made visible.
      const runId = randomUUID();
      this.#auditFor(trigger).emit('run.aborted', {
        runId,
        why: 'unexpected-error',
        errorCode: errorCode(error),
        message: errorMessage(error),
        keys: keys.map((key) => key.id),
      });
      await generation.runtime.alerter.send({
        severity: 'critical',
        summary: `keyroll daemon: a ${source} run stopped unexpectedly: ${errorMessage(error)}`,
        rotationId: runId,
        step: 'run',
        ...typedCode(error),
        nextAction: 'the next sweep retries the keys that are still due',
      });
    } finally {
      for (const keyId of [...began]) ended(keyId);
      for (const release of held.values()) release();
      done();
    }
  }

  #auditFor(trigger: RunTrigger): AuditLog {
    return this.#options.audit.child({
      ...(trigger.reason === 'scheduled' ? {} : { reason: trigger.reason }),
      ...(trigger.actor ? { actor: trigger.actor } : {}),
      ...(trigger.ticket ? { ticket: trigger.ticket } : {}),
    });
  }
}
