// What a failed step means for the operator: the alert's severity and the "what happens next"
// sentence (invariant 7). Kept in one table so the alert catalogue in the runbook matches.
import type { AlertSeverity } from '../alerts/public/types.ts';
import type { ProbeVerdict } from './roll.ts';
import type { RotationStep } from './types.ts';

export interface FailureMeaning {
  severity: AlertSeverity;
  nextAction: string;
}

export interface FailureContext {
  step: RotationStep;
  /** The API answered a roll with a new secret. */
  rolled: boolean;
  /** The new secret reached every destination. */
  stored: boolean;
  /** An unanswered roll may have been applied (the old secret may be dead). */
  mayHaveRolled: boolean;
  /** What the stored-secret probes said after unknown roll outcomes. */
  verdicts: readonly ProbeVerdict[];
  /** The API refused the freshly stored secret at verify. */
  apiRejected?: boolean;
  /**
   * A two-slot entry rolling its standby: the stored secret is the active slot's, which the roll
   * does not touch, so a lost or unstored roll kills nothing consumers use (invariant 10).
   */
  standby?: boolean;
}

export function failureMeaning(context: FailureContext): FailureMeaning {
  const { step, rolled, stored, mayHaveRolled, verdicts } = context;
  if (context.standby === true && (mayHaveRolled || (rolled && !stored))) {
    return {
      severity: 'error',
      nextAction:
        'only the standby slot was rolled; the active slot consumers use still works; the intent marker stays and the next run repairs and rolls the standby again',
    };
  }
  if (!rolled && mayHaveRolled) {
    const dead = verdicts.includes('rolled-and-lost');
    return {
      severity: 'critical',
      nextAction: dead
        ? 'the stored secret is DEAD (the API applied a roll whose answer was lost): the key is unusable until the next run re-rolls it; the intent marker stays'
        : 'the API may have applied a roll whose answer was lost, so the stored secret may be dead; the intent marker stays and the next run probes it and re-rolls if needed',
    };
  }
  if (!rolled) {
    const untouched = 'nothing was rolled; the current secret still works';
    if (step === 'preflight')
      return {
        severity: 'error',
        nextAction: `${untouched}; fix the destination or credential, then the next run retries`,
      };
    return { severity: 'error', nextAction: `${untouched}; the next run retries` };
  }
  if (!stored) {
    return {
      severity: 'critical',
      nextAction:
        'the key is unusable: the old secret is dead and the new one was not stored; the next run re-rolls it',
    };
  }
  if (step === 'verify' && context.apiRejected) {
    return {
      severity: 'critical',
      nextAction:
        'the API refuses the newly stored secret and the old one is dead; the intent marker stays and the next run probes and re-rolls',
    };
  }
  if (step === 'verify') {
    return {
      severity: 'error',
      nextAction:
        'the new secret is stored; check the destination and the API (see the error code); the next scheduled rotation re-checks',
    };
  }
  return {
    severity: 'error',
    nextAction: 'the new secret is stored; bookkeeping failed and the next run repairs it',
  };
}
