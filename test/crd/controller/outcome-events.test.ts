// Which outcomes make an Event on a RotatedKey (src/crd/controller/outcome-events.ts), with
// which reason and type; a skipped key, a busy lock or an aborted run makes none.
import { describe, expect, it } from 'vitest';
import { consumersEvent, outcomeEvent } from '../../../src/crd/controller/outcome-events.ts';
import { failed, rotated } from './fixtures.ts';

describe('Events of outcomes', () => {
  it('a rotation is Normal Rotated, a failure Warning RotationFailed, a quarantine Warning Quarantined', () => {
    expect(outcomeEvent(rotated())).toMatchObject({ type: 'Normal', reason: 'Rotated' });
    expect(outcomeEvent(rotated({ degraded: true }))).toMatchObject({ type: 'Warning', reason: 'Rotated' });
    expect(outcomeEvent(failed())).toMatchObject({
      type: 'Warning',
      reason: 'RotationFailed',
      message: 'rotation failed at step preflight (KR_BACKEND_DENIED) (rotation rot_3)',
    });
    expect(outcomeEvent(failed({ quarantinedAt: '2026-11-29T10:00:00Z' }))).toMatchObject({
      reason: 'Quarantined',
    });
    expect(outcomeEvent(failed({ step: 'drift', errorCode: 'KR_DRIFT_DETECTED' } as never))).toMatchObject({
      reason: 'DriftDetected',
    });
  });

  it('a skipped key, a busy lock or an aborted run makes no Event', () => {
    expect(outcomeEvent({ ...rotated(), result: 'skipped', detail: 'not-due' } as never)).toBeUndefined();
    expect(outcomeEvent({ ...rotated(), result: 'busy', detail: 'lock-busy' } as never)).toBeUndefined();
    expect(outcomeEvent({ ...rotated(), result: 'aborted', detail: 'shutdown' } as never)).toBeUndefined();
  });

  it('a delivery that failed is a Warning, one that refreshed Normal, one with nothing to do none', () => {
    const none = { refreshed: 0, failed: 0, deferred: 0, skipped: 0 };
    expect(consumersEvent({ ...none, failed: 1, refreshed: 2 })).toMatchObject({ reason: 'ConsumersFailed' });
    expect(consumersEvent({ ...none, refreshed: 2 })).toMatchObject({
      type: 'Normal',
      reason: 'ConsumersRefreshed',
    });
    expect(consumersEvent({ ...none, skipped: 2 })).toBeUndefined();
  });
});
