// The state one key's rotation carries from step to step (rotate-key.ts runs the steps): what
// has happened so far (rolled? stored? marker set?), the lock keeper, step timing, and the two
// ways out (an outcome, or a failure reported with the meaning failure.ts gives it).
import type { AuditLog } from '../audit/public/events.ts';
import type { KeyState } from '../backends/public/types.ts';
import { errorMessage, typedCode } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { spanClock, startStep, type TraceSpan } from '../tracing/public/spans.ts';
import {
  activeStreak,
  describeStreak,
  endedStreak,
  failureSettingsOf,
  nextFailure,
  type FailureVerdict,
} from './failure-streak.ts';
import type { FailureMeaning } from './failure.ts';
import type { LockKeeper } from './lock-keeper.ts';
import type { RollProgress } from './roll.ts';
import type { LeakLeftOpen } from './leak-marker.ts';
import type { RollPlan } from './slots.ts';
import type { WriteBudget } from './write-budget.ts';
import { sendAlert } from './key-alert.ts';
import { recordFailureBestEffort } from './store-outcome.ts';
import { readTrustedState } from './trusted-state.ts';
import { keyOutcome } from './outcome.ts';
import type {
  KeyOutcome,
  NonEmptyList,
  OutcomeEnd,
  OutcomeFacts,
  ResolvedDestination,
  RotationDeps,
  RotationStep,
  RunTrigger,
} from './types.ts';

export interface TransactionProgress extends RollProgress {
  step: RotationStep;
  /** The API answered a roll with a new secret. */
  rolled: boolean;
  /** The new secret reached every destination. */
  stored: boolean;
  /** Keeps the key lock alive while this rotation works (invariant 9); set once it is taken. */
  keeper?: LockKeeper;
  intentSet: boolean;
  /** This rotation's marker must outlive it: a runner whose lock it took over may still act. */
  holdUntil?: string;
  /** A leftover intent was found and the key is being re-rolled to repair it. */
  recovering?: string;
  /** That intent answered a leak its run never closed: this rotation answers it (recovery.ts). */
  leakRecovery?: LeakLeftOpen;
  /** The API refused the freshly stored secret at verify. */
  apiRejected?: boolean;
  /** Request budget taken before the roll for the writes after it (released once the store is over). */
  writeBudget?: WriteBudget;
}

export interface TransactionInput {
  key: KeyPolicy;
  destinations: NonEmptyList<ResolvedDestination>;
  fallbacks: ResolvedDestination[];
  trigger: RunTrigger;
  /** A two-slot entry: the slot a leak named (rolled at once, whichever is active). */
  slot?: string;
  signal?: AbortSignal;
  rotationId?: string;
  /** The primary's state as the caller read it before the lock (scheduled runs), for the failure streak. */
  knownState?: KeyState;
}

export class Transaction {
  readonly key: KeyPolicy;
  readonly destinations: NonEmptyList<ResolvedDestination>;
  readonly fallbacks: ResolvedDestination[];
  readonly trigger: RunTrigger;
  readonly primary: ResolvedDestination;
  readonly rotationId: string;
  readonly audit: AuditLog;
  readonly deps: RotationDeps;
  readonly input: TransactionInput;
  readonly progress: TransactionProgress = {
    step: 'preflight',
    rolled: false,
    stored: false,
    rolls: 0,
    mayHaveRolled: false,
    verdicts: [],
    intentSet: false,
  };
  /** Which API key this rotation rolls (the key itself, or a slot of a two-slot entry). */
  plan: RollPlan;
  /** The primary's state read under the lock (decideUnderLock): the failure streak a success ends. */
  stateUnderLock?: KeyState;
  /** Set when this rotation's failure quarantined the key (or found it quarantined): for the gauge. */
  #quarantinedAt: string | undefined;
  readonly #startedMs: number;
  #stepStartedMs: number;
  /** The current step's span (docs/tracing.md): a child of the key's span, ended with the step. */
  #stepSpan: TraceSpan;
  /** The roll's span, left open from the roll answer until the store is over (enterStore). */
  #rollSpan: { span: TraceSpan; answeredAt: number } | undefined;

  constructor(input: TransactionInput, deps: RotationDeps) {
    const [primary] = input.destinations;
    this.input = input;
    this.key = input.key;
    this.destinations = input.destinations;
    this.fallbacks = input.fallbacks;
    this.trigger = input.trigger;
    this.primary = primary;
    this.deps = deps;
    this.rotationId = input.rotationId ?? deps.newRotationId();
    this.audit = deps.audit.child({
      rotationId: this.rotationId,
      keyId: input.key.id,
      organizationId: input.key.organizationId,
    });
    this.plan = { rollKeyId: input.key.id };
    this.#startedMs = deps.monotonicMs();
    this.#stepStartedMs = this.#startedMs;
    this.#stepSpan = stepSpan('preflight');
  }

  /** Times the step that just ended (for the step-duration metric) and ends its span. */
  endStep(): void {
    const nowMs = this.deps.monotonicMs();
    this.deps.observer?.stepDuration(this.progress.step, nowMs - this.#stepStartedMs);
    this.#stepStartedMs = nowMs;
    this.#stepSpan.end();
    this.#endRollSpan();
  }

  /** Moves to the next step: times the previous one, then gives crash tests their pause point. */
  async enter(step: RotationStep): Promise<void> {
    this.endStep();
    this.progress.step = step;
    this.#stepSpan = stepSpan(step);
    await this.deps.checkpoint?.(step);
  }

  /** The roll step begins (no pause point: the roll attempts have their own). */
  enterRoll(): void {
    this.endStep();
    this.progress.step = 'roll';
    this.#stepSpan = stepSpan('roll');
  }

  /**
   * The roll answered: the store step begins. Invariant 2: nothing here does I/O and no span ends.
   * The store's span starts (memory only) so the writes are its children; the roll's span is ended
   * after the store (endRollAt), stamped with this instant.
   */
  enterStore(): void {
    this.progress.step = 'store';
    this.#rollSpan = { span: this.#stepSpan, answeredAt: spanClock() };
    this.#stepSpan = stepSpan('store');
  }

  /** The roll's duration ends at the answer, not when the store finishes. */
  endRollAt(answeredAtMs: number): void {
    this.deps.observer?.stepDuration('roll', answeredAtMs - this.#stepStartedMs);
    this.#stepStartedMs = answeredAtMs;
    this.#endRollSpan();
  }

  #endRollSpan(): void {
    this.#rollSpan?.span.end(this.#rollSpan.answeredAt);
    this.#rollSpan = undefined;
  }

  elapsedMs(): number {
    return Math.round(this.deps.monotonicMs() - this.#startedMs);
  }

  outcome(end: OutcomeEnd, extra: Partial<OutcomeFacts> = {}): KeyOutcome {
    return keyOutcome(
      {
        keyId: this.key.id,
        organizationId: this.key.organizationId,
        rotationId: this.rotationId,
        durationMs: this.elapsedMs(),
        rolls: this.progress.rolls,
        ...(this.key.slots ? { rolledKeyId: this.plan.rollKeyId } : {}),
        ...(this.#quarantinedAt === undefined ? {} : { quarantinedAt: this.#quarantinedAt }),
        ...extra,
      },
      end,
    );
  }

  /**
   * Invariant 7: the failed step, its code and what happens next, audited every time. The failure
   * joins the key's streak at the primary destination (failure-streak.ts), which decides whether
   * it alerts: a change of state or a reminder does; a repeat inside remindEvery is audited as
   * alert.suppressed instead. A key with an intent marker alerts every time.
   */
  async reportFailure(
    error: unknown,
    step: RotationStep,
    code: string,
    meaning: FailureMeaning,
  ): Promise<void> {
    const { progress, key, audit } = this;
    const state = await this.#stateBeforeFailure();
    const at = this.deps.now().toISOString();
    const onDemand = this.trigger.reason !== 'scheduled' && this.trigger.reason !== 'drift';
    const intentMarked = progress.rolled || progress.mayHaveRolled || state?.intent !== undefined;
    const verdict = nextFailure(
      state && activeStreak(state),
      { rotationId: this.rotationId, step, errorCode: code, at, intentMarked, onDemand },
      failureSettingsOf(key),
    );
    const { record } = verdict;
    this.#quarantinedAt = record.quarantinedAt;
    this.#stepSpan.fail(code);
    const nextAction = intentMarked ? meaning.nextAction : withStreak(meaning.nextAction, verdict);
    audit.emit('key.failed', {
      step,
      errorCode: code,
      error: errorMessage(error),
      nextAction,
      consecutive: record.consecutive,
      ...(record.nextAttemptAt ? { nextAttemptAt: record.nextAttemptAt } : {}),
      ...(record.quarantinedAt ? { quarantinedAt: record.quarantinedAt } : {}),
      ...(progress.verdicts.length > 0 ? { verdicts: progress.verdicts } : {}),
    });
    // A runner that lost its lock writes nothing more (invariant 9). Before the lock there is none
    // to lose: the backends change only the failure record, never another runner's marker.
    if (progress.keeper?.lost !== true) await recordFailureBestEffort(this.primary, record);
    if (verdict.alert === 'quarantine') {
      audit.emit('key.quarantined', {
        step,
        errorCode: code,
        consecutive: record.consecutive,
        firstAt: record.firstAt,
        quarantinedAt: record.quarantinedAt,
      });
    }
    await this.#alertFailure(error, step, code, meaning, { verdict, nextAction, intentMarked });
  }

  /** The alert of a failure, as the streak's verdict decides: suppressed (audited), quarantined, a reminder or new. */
  async #alertFailure(
    error: unknown,
    step: RotationStep,
    code: string,
    meaning: FailureMeaning,
    decided: { verdict: FailureVerdict; nextAction: string; intentMarked: boolean },
  ): Promise<void> {
    const { progress, key, audit } = this;
    const { verdict, nextAction, intentMarked } = decided;
    const { record } = verdict;
    const probes =
      progress.verdicts.length > 0 ? ` (probes after unanswered rolls: ${progress.verdicts.join(', ')})` : '';
    if (verdict.alert === 'suppressed') {
      audit.emit('alert.suppressed', {
        step,
        alertErrorCode: code,
        severity: meaning.severity,
        why: 'repeat-failure',
        consecutive: record.consecutive,
        lastAlertedAt: record.lastAlertedAt,
        nextAttemptAt: record.nextAttemptAt,
      });
      return;
    }
    const summary = `keyroll could not rotate key ${key.id} (${key.organizationId}) at step ${step}: ${errorMessage(error)}${probes}`;
    if (verdict.alert === 'quarantine') {
      await sendAlert(this.deps, key, {
        severity: 'critical',
        summary: `key ${key.id} (${key.organizationId}) is QUARANTINED after ${describeStreak(verdict.streak)}; the last failure was at step ${step} (${code}): ${errorMessage(error)}`,
        rotationId: this.rotationId,
        step,
        errorCode: 'KR_KEY_QUARANTINED',
        nextAction: `no automatic attempts until a person acts: fix the cause, then \`keyroll resume --key ${key.id} --actor <name>\` (or \`keyroll rotate --key ${key.id}\`); the current secret still works`,
        details: {
          lastErrorCode: code,
          consecutive: record.consecutive,
          firstAt: record.firstAt,
          quarantinedAt: record.quarantinedAt,
        },
      });
      return;
    }
    await sendAlert(this.deps, key, {
      severity: meaning.severity,
      summary: verdict.alert === 'reminder' ? `still failing: ${summary}` : summary,
      rotationId: this.rotationId,
      step,
      ...typedCode(code),
      nextAction,
      ...(intentMarked
        ? {}
        : {
            details: {
              consecutive: record.consecutive,
              firstAt: record.firstAt,
              nextAttemptAt: record.nextAttemptAt,
            },
          }),
    });
  }

  /**
   * After a success under the lock: ends the key's failure streak (a quarantine included: a
   * manual or leak rotation that succeeds lifts it) and, when someone was told of the failures and
   * this rotation has not already said it recovered, says so once.
   */
  async endFailureStreak(outcome: KeyOutcome): Promise<void> {
    if (outcome.result !== 'rotated' && outcome.result !== 'recovered') return;
    const streak = this.stateUnderLock && activeStreak(this.stateUnderLock);
    if (streak === undefined || this.progress.keeper?.lost === true) return;
    await recordFailureBestEffort(this.primary, endedStreak(streak));
    this.audit.emit('key.failures.cleared', {
      step: 'finish',
      by: 'rotation',
      consecutive: streak.consecutive,
      firstAt: streak.firstAt,
      ...(streak.quarantinedAt ? { quarantinedAt: streak.quarantinedAt } : {}),
    });
    const saidRecovered = outcome.result === 'recovered' || this.progress.recovering !== undefined;
    if (streak.lastAlertedAt === undefined || saidRecovered) return;
    await sendAlert(this.deps, this.key, {
      severity: 'warning',
      summary: `key ${this.key.id} (${this.key.organizationId}) rotated again after ${describeStreak(streak)}`,
      rotationId: this.rotationId,
      step: 'recovery',
      errorCode: 'KR_KEY_RECOVERED',
      nextAction:
        streak.quarantinedAt === undefined
          ? 'nothing to do: automatic rotations go on as scheduled'
          : 'nothing to do: the quarantine is lifted and automatic rotations go on as scheduled',
    });
  }

  /** The state the failure streak continues from: read under the lock, else by the caller, else now (best effort). */
  async #stateBeforeFailure(): Promise<KeyState | undefined> {
    if (this.stateUnderLock) return this.stateUnderLock;
    if (this.input.knownState) return this.input.knownState;
    try {
      return await readTrustedState(this.primary, this.key, this.deps.now());
    } catch {
      // Unknown: the failure counts as a first one and alerts (never silent for lack of a read).
      return undefined;
    }
  }
}

function stepSpan(step: RotationStep): TraceSpan {
  return startStep(step, { 'keyroll.step': step });
}

/** "The next run retries" is no longer true of a key in backoff or quarantine: say when it is retried. */
function withStreak(nextAction: string, verdict: FailureVerdict): string {
  const { record } = verdict;
  const base = nextAction.replace(/(;|,) (then )?the next run retries$/, '');
  if (record.quarantinedAt !== undefined)
    return `${base}; the key is quarantined: no automatic attempts until \`keyroll resume\` or a manual rotation`;
  return `${base}; failure ${String(record.consecutive)} in a row: the next automatic attempt is not before ${record.nextAttemptAt ?? 'the next run'}`;
}
