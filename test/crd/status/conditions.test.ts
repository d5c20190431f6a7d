import { describe, expect, it } from 'vitest';
import {
  conditionTime,
  mergeConditions,
  MESSAGE_MAX,
  type Condition,
  type DesiredCondition,
} from '../../../src/crd/status/conditions.ts';

const T0 = new Date('2026-11-29T08:00:00.123Z');
const T1 = new Date('2026-11-29T09:30:00.999Z');
const ready: DesiredCondition = { type: 'Ready', status: 'True', reason: 'Rotated', message: 'rotated' };

describe('mergeConditions', () => {
  it('a new type starts at now, in metav1.Time form (whole seconds), with observedGeneration', () => {
    expect(mergeConditions(undefined, [ready], 3, T0)).toEqual([
      { ...ready, lastTransitionTime: '2026-11-29T08:00:00Z', observedGeneration: 3 },
    ]);
  });

  it('the same status keeps lastTransitionTime and takes the new reason, message and generation', () => {
    const stored = mergeConditions(undefined, [ready], 1, T0);
    const merged = mergeConditions(stored, [{ ...ready, reason: 'RotatedNow', message: 'again' }], 2, T1);
    expect(merged).toEqual([
      {
        type: 'Ready',
        status: 'True',
        reason: 'RotatedNow',
        message: 'again',
        lastTransitionTime: '2026-11-29T08:00:00Z',
        observedGeneration: 2,
      },
    ]);
  });

  it('a status that flips moves lastTransitionTime to now', () => {
    const stored = mergeConditions(undefined, [ready], 1, T0);
    const merged = mergeConditions(stored, [{ ...ready, status: 'False', reason: 'RotationFailed' }], 1, T1);
    expect(merged[0]?.lastTransitionTime).toBe('2026-11-29T09:30:00Z');
  });

  it('equal facts merge to an equal list (so the writer has nothing to write)', () => {
    const stored = mergeConditions(undefined, [ready], 1, T0);
    expect(mergeConditions(stored, [ready], 1, T1)).toEqual(stored);
  });

  it('keeps stored types it is not asked about, in order; new types follow', () => {
    const drifted: Condition = {
      type: 'Drifted',
      status: 'False',
      reason: 'Verified',
      message: '',
      lastTransitionTime: '2026-11-01T00:00:00Z',
    };
    const rotating: DesiredCondition = { type: 'Rotating', status: 'False', reason: 'Idle', message: '' };
    const merged = mergeConditions([drifted], [ready, rotating], 1, T0);
    expect(merged.map((condition) => condition.type)).toEqual(['Drifted', 'Ready', 'Rotating']);
    expect(merged[0]).toEqual(drifted);
  });

  it('does not change the stored list it was given', () => {
    const stored = mergeConditions(undefined, [ready], 1, T0);
    const copy = structuredClone(stored);
    mergeConditions(stored, [{ ...ready, status: 'False' }], 2, T1);
    expect(stored).toEqual(copy);
  });

  it('refuses a reason the API server would refuse, and caps the message', () => {
    expect(() => mergeConditions(undefined, [{ ...ready, reason: 'not camel case' }], 1, T0)).toThrow(
      RangeError,
    );
    const long = mergeConditions(undefined, [{ ...ready, message: 'x'.repeat(MESSAGE_MAX + 10) }], 1, T0);
    expect(long[0]?.message).toHaveLength(MESSAGE_MAX);
  });

  it('conditionTime drops the fraction', () => {
    expect(conditionTime(T1)).toBe('2026-11-29T09:30:00Z');
  });
});
