// The state one key's rotation carries from step to step (rotate-key.ts runs the steps): what
// has happened so far (rolled? stored? marker set?), the lock keeper, step timing, and the two
// ways out (an outcome, or a failure reported with the meaning failure.ts gives it).
import type { AuditLog } from '../audit/events.ts';
import { errorMessage } from '../errors.ts';
import type { KeyPolicy } from '../policy/schema.ts';
import type { FailureMeaning } from './failure.ts';
import type { LockKeeper } from './lock-keeper.ts';
import type { RollProgress } from './roll.ts';
import type { RollPlan } from './slots.ts';
import { recordFailureBestEffort, sendAlert } from './store-outcome.ts';
import type { KeyOutcome, ResolvedDestination, RotationDeps, RotationStep, RunTrigger } from './types.ts';

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
  /** The API refused the freshly stored secret at verify. */
  apiRejected?: boolean;
}

export interface TransactionInput {
  key: KeyPolicy;
  destinations: ResolvedDestination[];
  fallbacks: ResolvedDestination[];
  trigger: RunTrigger;
  /** A two-slot entry: the slot a leak named (rolled at once, whichever is active). */
  slot?: string;
  signal?: AbortSignal;
  rotationId?: string;
}

export class Transaction {
  readonly key: KeyPolicy;
  readonly destinations: ResolvedDestination[];
  readonly fallbacks: ResolvedDestination[];
  readonly trigger: RunTrigger;
  readonly primary: ResolvedDestination;
  readonly rotationId: string;
  readonly audit: AuditLog;
  readonly deps: RotationDeps;
  readonly input: TransactionInput;
  readonly progress: TransactionProgress = { step: 'preflight', rolled: false, stored: false, rolls: 0, mayHaveRolled: false, verdicts: [], intentSet: false };
  /** Which API key this rotation rolls (the key itself, or a slot of a two-slot entry). */
  plan: RollPlan;
  readonly #startedMs: number;
  #stepStartedMs: number;

  constructor(input: TransactionInput, deps: RotationDeps) {
    const primary = input.destinations[0];
    if (!primary) throw new Error(`key ${input.key.id} has no destination`);
    this.input = input;
    this.key = input.key;
    this.destinations = input.destinations;
    this.fallbacks = input.fallbacks;
    this.trigger = input.trigger;
    this.primary = primary;
    this.deps = deps;
    this.rotationId = input.rotationId ?? deps.newRotationId();
    this.audit = deps.audit.child({ rotationId: this.rotationId, keyId: input.key.id, organizationId: input.key.organizationId });
    this.plan = { rollKeyId: input.key.id };
    this.#startedMs = deps.monotonicMs();
    this.#stepStartedMs = this.#startedMs;
  }

  /** Times the step that just ended (for the step-duration metric). */
  endStep(): void {
    const nowMs = this.deps.monotonicMs();
    this.deps.observer?.stepDuration(this.progress.step, nowMs - this.#stepStartedMs);
    this.#stepStartedMs = nowMs;
  }

  /** Moves to the next step: times the previous one, then gives crash tests their pause point. */
  async enter(step: RotationStep): Promise<void> {
    this.endStep();
    this.progress.step = step;
    await this.deps.checkpoint?.(step);
  }

  /** The roll's duration ends at the answer, not when the store finishes. */
  endRollAt(answeredAtMs: number): void {
    this.deps.observer?.stepDuration('roll', answeredAtMs - this.#stepStartedMs);
    this.#stepStartedMs = answeredAtMs;
  }

  elapsedMs(): number {
    return Math.round(this.deps.monotonicMs() - this.#startedMs);
  }

  outcome(result: KeyOutcome['result'], extra: Partial<KeyOutcome> = {}): KeyOutcome {
    return {
      keyId: this.key.id,
      organizationId: this.key.organizationId,
      result,
      rotationId: this.rotationId,
      durationMs: this.elapsedMs(),
      rolls: this.progress.rolls,
      ...(this.key.slots ? { rolledKeyId: this.plan.rollKeyId } : {}),
      ...extra,
    };
  }

  /** Invariant 7: the failed step, its code and what happens next, audited and alerted. */
  async reportFailure(error: unknown, step: RotationStep, code: string, meaning: FailureMeaning): Promise<void> {
    const { progress, key } = this;
    const probes = progress.verdicts.length > 0 ? ` (probes after unanswered rolls: ${progress.verdicts.join(', ')})` : '';
    this.audit.emit('key.failed', { step, errorCode: code, error: errorMessage(error), nextAction: meaning.nextAction, ...(progress.verdicts.length > 0 ? { verdicts: progress.verdicts } : {}) });
    // Bookkeeping only under the lock: without it, a write could erase another runner's intent.
    if (progress.keeper && !progress.keeper.lost) {
      await recordFailureBestEffort(this.primary, { rotationId: this.rotationId, step, errorCode: code, at: this.deps.now().toISOString() });
    }
    await sendAlert(this.deps, key, {
      severity: meaning.severity,
      summary: `keyroll could not rotate key ${key.id} (${key.organizationId}) at step ${step}: ${errorMessage(error)}${probes}`,
      rotationId: this.rotationId,
      step,
      errorCode: code,
      nextAction: meaning.nextAction,
    });
  }
}
