// What a failed step means for the operator: the alert's severity and the "what happens next"
// sentence (invariant 7). Kept in one table so the alert catalogue in the runbook matches.
import type { AlertSeverity } from '../alerts/types.ts';
import type { RotationStep } from './types.ts';

export interface FailureMeaning {
  severity: AlertSeverity;
  nextAction: string;
}

export function failureMeaning(step: RotationStep, rolled: boolean): FailureMeaning {
  if (!rolled) {
    const untouched = 'nothing was rolled; the current secret still works';
    switch (step) {
      case 'preflight':
        return { severity: 'error', nextAction: `${untouched}; fix the destination or credential, then the next run retries` };
      case 'roll':
        return { severity: 'error', nextAction: `${untouched} unless the API applied an unanswered roll; the intent marker stays and the next run probes and repairs` };
      default:
        return { severity: 'error', nextAction: `${untouched}; the next run retries` };
    }
  }
  switch (step) {
    case 'store':
      return { severity: 'critical', nextAction: 'the key is unusable: the old secret is dead and the new one was not stored; the next run re-rolls it' };
    case 'verify':
      return { severity: 'error', nextAction: 'the new secret is stored; check the destination and the API; the next run re-checks' };
    default:
      return { severity: 'error', nextAction: 'the new secret is stored; bookkeeping failed and the next run repairs it' };
  }
}
