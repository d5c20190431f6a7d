// Which Events keyroll records on a RotatedKey, so `kubectl describe` tells the story of its
// rotations (issue 31): one per rotation that ends (stored, or failed), one per drift found, per
// delivery to consumers that ends, per refusal and per rotate-now request settled. None for a
// skipped key (not due, in backoff, quarantined: the sweep asks every interval and an Event each
// time would bury the ones that matter; the status says it), a busy lock or an aborted run (another
// runner, or the next leader, carries on). Messages are built from ids, codes, steps and times.
import type { KeyOutcome } from '../../rotation/public/types.ts';
import type { EventReason, EventType } from '../status/events.ts';
import type { ConsumersReport } from './key-facts.ts';

export interface EventFacts {
  type: EventType;
  reason: EventReason;
  message: string;
}

function rotatedMessage(outcome: KeyOutcome): string {
  const what = outcome.result === 'recovered' ? 'an interrupted rotation was repaired' : 'rotated';
  const parts = [
    `${what}${outcome.reason === undefined ? '' : ` (${outcome.reason})`}`,
    ...(outcome.rotationId === undefined ? [] : [`rotation ${outcome.rotationId}`]),
    ...(outcome.rolledKeyId !== undefined && outcome.rolledKeyId !== outcome.keyId
      ? [`slot ${outcome.rolledKeyId}`]
      : []),
    ...(outcome.degraded === true ? ['the new value reached only a fallback or escrow'] : []),
  ];
  return parts.join('; ');
}

/** The Event for one key outcome, or undefined when the outcome is not worth one (see above). */
export function outcomeEvent(outcome: KeyOutcome): EventFacts | undefined {
  if (outcome.result === 'rotated' || (outcome.result === 'recovered' && outcome.rotatedAt !== undefined))
    return {
      type: outcome.degraded === true ? 'Warning' : 'Normal',
      reason: 'Rotated',
      message: rotatedMessage(outcome),
    };
  if (outcome.result !== 'failed') return undefined;
  const rotation = outcome.rotationId === undefined ? '' : ` (rotation ${outcome.rotationId})`;
  if (outcome.errorCode === 'KR_DRIFT_DETECTED')
    return {
      type: 'Warning',
      reason: 'DriftDetected',
      message: 'the stored secret no longer works: the key was rolled outside keyroll',
    };
  if (outcome.quarantinedAt !== undefined)
    return {
      type: 'Warning',
      reason: 'Quarantined',
      message: `rotation failed at step ${outcome.step} (${outcome.errorCode})${rotation}; quarantined since ${outcome.quarantinedAt}: no automatic rotation until keyroll resume or a rotate-now`,
    };
  return {
    type: 'Warning',
    reason: 'RotationFailed',
    message: `rotation failed at step ${outcome.step} (${outcome.errorCode})${rotation}`,
  };
}

/** The Event for a delivery to the key's consumers; none when nothing was due to them. */
export function consumersEvent(report: ConsumersReport): EventFacts | undefined {
  if (report.failed > 0)
    return {
      type: 'Warning',
      reason: 'ConsumersFailed',
      message: `${String(report.failed)} consumer(s) could not be refreshed, ${String(report.refreshed)} refreshed; the rotation stands (see the audit trail)`,
    };
  if (report.refreshed > 0)
    return {
      type: 'Normal',
      reason: 'ConsumersRefreshed',
      message: `${String(report.refreshed)} consumer(s) refreshed${report.deferred > 0 ? `, ${String(report.deferred)} deferred to their restart window` : ''}`,
    };
  return undefined;
}
