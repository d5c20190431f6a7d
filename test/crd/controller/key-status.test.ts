// The RotatedKey status as a pure function of what keyroll knows of the key (src/crd/controller/):
// each fact drives its condition with a CamelCase reason, the same facts give the same status
// whatever the clock (so nothing is written again), a refusal is Ready=False with its reason, and
// no message carries a secret.
import { describe, expect, it } from 'vitest';
import { Condition as ConditionSchema } from '../../../src/crd/kinds/rotated-key-status.ts';
import {
  factsAfterConsumers,
  factsAfterOutcome,
  factsFromState,
  type KeyFacts,
} from '../../../src/crd/controller/key-facts.ts';
import { desiredConditions, keyStatus } from '../../../src/crd/controller/key-status.ts';
import { findCondition, type Condition } from '../../../src/crd/status/conditions.ts';
import { mergePatch } from '../../../src/crd/status/merge-patch.ts';
import { DAY, DEPLOYMENT, failed, HOUR, keyWith, rotated, stateWith } from './fixtures.ts';

const T0 = new Date('2026-11-29T10:00:00Z');
const T1 = new Date('2026-11-30T11:30:00Z');
const conditionsOf = (status: Record<string, unknown>): Condition[] => status.conditions as Condition[];
const reasonOf = (facts: KeyFacts, type: string): string | undefined =>
  desiredConditions(facts).find((condition) => condition.type === type)?.reason;

describe('facts from the key record', () => {
  it('reads the last rotation, the next due time (maxAge, whole seconds) and the key as its slot', () => {
    const facts = factsFromState(
      keyWith(),
      stateWith({ lastRotatedAt: '2026-11-01T08:00:00.123Z', lastRotationId: 'rot_1' }),
    );
    expect(facts).toEqual({
      keyId: 'key_billing',
      lastRotatedAt: '2026-11-01T08:00:00.123Z',
      lastRotationId: 'rot_1',
      nextRotation: '2026-12-01T08:00:00Z',
      failedAttempts: 0,
      activeSlot: 'key_billing',
    });
  });

  it('takes the next time from the schedule after the last rotation, never before minInterval', () => {
    const key = keyWith({ schedule: '0 8 * * *', maxAgeMs: undefined, minIntervalMs: 2 * DAY });
    const facts = factsFromState(key, stateWith({ lastRotatedAt: '2026-11-01T08:00:00Z' }));
    expect(facts.nextRotation).toBe('2026-11-03T08:00:00Z');
    const daily = keyWith({ schedule: '0 8 * * *', maxAgeMs: undefined });
    expect(factsFromState(daily, stateWith({ lastRotatedAt: '2026-11-01T08:00:00Z' })).nextRotation).toBe(
      '2026-11-02T08:00:00Z',
    );
  });

  it('reads the failure streak, its backoff and quarantine, the drift probe, the intent and the active slot', () => {
    const key = keyWith({ slots: ['key_a', 'key_b'], consumerRefreshMs: HOUR, consumers: [DEPLOYMENT] });
    const facts = factsFromState(
      key,
      stateWith({
        lastRotatedAt: '2026-11-01T08:00:00Z',
        lastKeyId: 'key_b',
        lastProbe: { at: '2026-11-02T08:00:00Z', result: 'dead' },
        lastFailure: {
          rotationId: 'rot_9',
          step: 'store',
          errorCode: 'KR_BACKEND_DENIED',
          at: '2026-11-03T08:00:00Z',
          consecutive: 5,
          quarantinedAt: '2026-11-03T08:00:00Z',
        },
      }),
    );
    expect(facts).toMatchObject({
      failedAttempts: 5,
      quarantinedAt: '2026-11-03T08:00:00Z',
      driftedAt: '2026-11-02T08:00:00Z',
      activeSlot: 'key_b',
      consumers: { count: 1, state: 'unknown' },
      lastFailure: { errorCode: 'KR_BACKEND_DENIED', step: 'store' },
    });
    expect(facts.nextRotation).toBeUndefined();
  });
});

describe('conditions', () => {
  const healthy = factsFromState(keyWith(), stateWith({ lastRotatedAt: '2026-11-01T08:00:00Z' }));

  it('a key rotated and healthy is Ready=True Rotated, not Rotating, not quarantined, not drifted', () => {
    expect(desiredConditions(healthy).map(({ type, status, reason }) => ({ type, status, reason }))).toEqual([
      { type: 'Ready', status: 'True', reason: 'Rotated' },
      { type: 'Rotating', status: 'False', reason: 'Idle' },
      { type: 'ConsumersRefreshed', status: 'True', reason: 'NoConsumers' },
      { type: 'Quarantined', status: 'False', reason: 'NotQuarantined' },
      { type: 'Drifted', status: 'False', reason: 'NoDrift' },
    ]);
  });

  it('each fact gives Ready its reason, the worst first', () => {
    expect(reasonOf({ ...healthy, quarantinedAt: 'x', failedAttempts: 5 }, 'Ready')).toBe('Quarantined');
    expect(reasonOf({ ...healthy, driftedAt: '2026-11-02T00:00:00Z' }, 'Ready')).toBe('Drifted');
    expect(reasonOf({ ...healthy, intent: { rotationId: 'r', startedAt: 's' } }, 'Ready')).toBe(
      'RotationIncomplete',
    );
    const failing = {
      ...healthy,
      failedAttempts: 2,
      lastFailure: { errorCode: 'KR_X', step: 'roll', at: 'a' },
    };
    expect(reasonOf(failing, 'Ready')).toBe('RotationFailed');
    expect(reasonOf({ keyId: 'k', failedAttempts: 0 }, 'Ready')).toBe('NeverRotated');
    expect(reasonOf({ keyId: 'k', failedAttempts: 0, readError: { errorCode: 'KR_X' } }, 'Ready')).toBe(
      'StateUnreadable',
    );
    expect(reasonOf({ ...healthy, intent: { rotationId: 'r', startedAt: 's' } }, 'Rotating')).toBe(
      'IntentPending',
    );
    expect(reasonOf({ ...healthy, quarantinedAt: 'x' }, 'Quarantined')).toBe('FailureStreak');
    expect(reasonOf({ ...healthy, driftedAt: 'x' }, 'Drifted')).toBe('StoredSecretDead');
  });

  it('the consumers of the last rotation: pending, refreshed, failed, not needed', () => {
    const key = keyWith({ consumers: [DEPLOYMENT] });
    const before = factsFromState(key, stateWith({ lastRotatedAt: '2026-11-01T08:00:00Z' }));
    expect(reasonOf(before, 'ConsumersRefreshed')).toBe('NotReported');
    const after = factsAfterOutcome(key, before, rotated(), T0);
    expect(reasonOf(after, 'ConsumersRefreshed')).toBe('RefreshPending');
    const report = { refreshed: 0, failed: 0, deferred: 0, skipped: 0 };
    expect(reasonOf(factsAfterConsumers(after, { ...report, refreshed: 1 }), 'ConsumersRefreshed')).toBe(
      'Refreshed',
    );
    expect(reasonOf(factsAfterConsumers(after, { ...report, failed: 1 }), 'ConsumersRefreshed')).toBe(
      'RefreshFailed',
    );
    expect(reasonOf(factsAfterConsumers(after, { ...report, skipped: 1 }), 'ConsumersRefreshed')).toBe(
      'NotNeeded',
    );
  });

  it('every reason is one the API server takes (metav1.Condition)', () => {
    const all: KeyFacts[] = [
      healthy,
      { keyId: 'k', failedAttempts: 0 },
      { keyId: 'k', failedAttempts: 0, readError: { errorCode: 'KR_X' } },
      { ...healthy, quarantinedAt: 'x', driftedAt: 'y', intent: { rotationId: 'r', startedAt: 's' } },
      { ...healthy, consumers: { count: 2, state: 'deferred', affected: 1 } },
    ];
    for (const facts of all)
      for (const condition of keyStatus({ facts, generation: 3, now: T0 })
        .conditions as unknown as Condition[])
        expect(ConditionSchema.safeParse(condition).success, condition.reason).toBe(true);
  });
});

describe('the status', () => {
  const key = keyWith();
  const facts = factsFromState(
    key,
    stateWith({ lastRotatedAt: '2026-11-01T08:00:00.123Z', lastRotationId: 'rot_1' }),
  );

  it('carries the facts and observedGeneration, in the printer columns’ fields', () => {
    const status = keyStatus({ facts, generation: 4, now: T0 });
    expect(status).toMatchObject({
      observedGeneration: 4,
      lastRotated: '2026-11-01T08:00:00Z',
      nextRotation: '2026-12-01T08:00:00Z',
      activeSlot: 'key_billing',
      failedAttempts: 0,
      lastRotationId: 'rot_1',
    });
    expect(findCondition(conditionsOf(status), 'Ready')).toMatchObject({
      status: 'True',
      observedGeneration: 4,
      lastTransitionTime: '2026-11-29T10:00:00Z',
    });
  });

  it('the same facts a day later give the same status: nothing to write', () => {
    const first = keyStatus({ facts, generation: 4, now: T0 });
    const again = keyStatus({ facts, generation: 4, stored: first, now: T1 });
    expect(mergePatch(first, again)).toEqual({});
  });

  it('a rotation changes only what it moved, and Ready keeps its transition time', () => {
    const first = keyStatus({ facts, generation: 4, now: T0 });
    const after = factsAfterOutcome(key, facts, rotated(), T1);
    const patch = mergePatch(first, keyStatus({ facts: after, generation: 4, stored: first, now: T1 }));
    expect(patch).toMatchObject({
      lastRotated: '2026-11-29T10:00:00Z',
      nextRotation: '2026-12-29T10:00:00Z',
      lastRotationId: 'rot_2',
    });
    const ready = findCondition(patch.conditions as unknown as Condition[], 'Ready');
    expect(ready).toMatchObject({ status: 'True', lastTransitionTime: '2026-11-29T10:00:00Z' });
  });

  it('a failure adds to the streak; the next rotation ends it', () => {
    const once = factsAfterOutcome(key, facts, failed(), T0);
    const twice = factsAfterOutcome(key, once, failed({ quarantinedAt: '2026-11-29T10:00:00Z' }), T1);
    expect(twice).toMatchObject({ failedAttempts: 2, quarantinedAt: '2026-11-29T10:00:00Z' });
    const healed = factsAfterOutcome(key, twice, rotated({ reason: 'manual' }), T1);
    expect(healed.failedAttempts).toBe(0);
    expect(healed.quarantinedAt).toBeUndefined();
    expect(healed.lastFailure).toBeUndefined();
  });

  it('a refusal is Ready=False with its reason and message, and the past facts stay as stored', () => {
    const stored = keyStatus({ facts, generation: 4, now: T0 });
    const refused = keyStatus({
      refusal: { reason: 'OrganizationNotAdmitted', message: 'org_billing is not admitted in billing' },
      generation: 5,
      stored,
      now: T1,
    });
    expect(findCondition(conditionsOf(refused), 'Ready')).toMatchObject({
      status: 'False',
      reason: 'OrganizationNotAdmitted',
      message: 'org_billing is not admitted in billing',
      observedGeneration: 5,
      lastTransitionTime: '2026-11-30T11:30:00Z',
    });
    expect(refused).toMatchObject({ observedGeneration: 5, lastRotated: '2026-11-01T08:00:00Z' });
  });

  it('never carries the secret: an error text holding one reaches no message', () => {
    const secret = 'sk_live_0123456789abcdef0123456789abcdef';
    const outcome = failed({ detail: `the store refused ${secret}` });
    const status = keyStatus({ facts: factsAfterOutcome(key, facts, outcome, T0), generation: 1, now: T0 });
    expect(JSON.stringify(status)).not.toContain(secret);
  });
});
