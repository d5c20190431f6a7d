// The arithmetic of failure backoff and quarantine, and how older failure records read.
import { describe, expect, it } from 'vitest';
import type { FailureSettings } from '../../src/policy/schema.ts';
import {
  activeStreak,
  automaticAttemptGate,
  backoffAfter,
  nextFailure,
} from '../../src/rotation/failure-streak.ts';

const HOUR = 3600_000;
const SETTINGS: FailureSettings = {
  backoffInitialMs: HOUR,
  backoffCapMs: 24 * HOUR,
  jitter: 0.2,
  quarantineAfter: 5,
  remindEveryMs: 24 * HOUR,
};
const facts = (at: string) => ({
  rotationId: `r-${at}`,
  step: 'preflight',
  errorCode: 'KR_BACKEND_DENIED',
  at,
  intentMarked: false,
  onDemand: false,
});

describe('backoff', () => {
  it('doubles from initial and stops at the cap', () => {
    const exact = { ...SETTINGS, jitter: 0 };
    expect([1, 2, 3, 4, 5, 6, 40].map((n) => backoffAfter(n, exact) / HOUR)).toEqual([
      1, 2, 4, 8, 16, 24, 24,
    ]);
  });

  it('jitter only shortens a wait, by at most its share', () => {
    expect(backoffAfter(1, SETTINGS, () => 0)).toBe(HOUR);
    expect(backoffAfter(1, SETTINGS, () => 0.999999)).toBeGreaterThan(0.8 * HOUR);
    expect(backoffAfter(10, SETTINGS, () => 0.5)).toBe(0.9 * 24 * HOUR);
  });
});

describe('the streak', () => {
  it('a record written before streaks existed reads as one failure, over once a rotation is recorded after it', () => {
    const old = {
      rotationId: 'r0',
      step: 'roll',
      errorCode: 'KR_API_FORBIDDEN',
      at: '2030-01-02T00:00:00.000Z',
    };
    expect(activeStreak({ lastFailure: old })).toMatchObject({
      consecutive: 1,
      firstAt: old.at,
      lastAlertedAt: old.at,
    });
    expect(activeStreak({ lastFailure: old, lastRotatedAt: '2030-01-03T00:00:00.000Z' })).toBeUndefined();
    // It carries no backoff: the next run attempts the key as an older keyroll would.
    expect(automaticAttemptGate({ lastFailure: old }, new Date('2030-01-02T00:01:00.000Z'))).toEqual({
      kind: 'go',
    });
  });

  it('a streak the record says ended (consecutive 0) is over', () => {
    expect(
      activeStreak({
        lastFailure: {
          rotationId: 'r',
          step: 'lock',
          errorCode: 'X',
          at: '2030-01-01T00:00:00.000Z',
          consecutive: 0,
        },
      }),
    ).toBeUndefined();
  });

  it('counts, alerts on the first failure and at quarantine, and suppresses repeats in between', () => {
    let prior;
    const kinds: string[] = [];
    for (let i = 0; i < 6; i++) {
      const verdict = nextFailure(
        prior,
        facts(new Date(Date.UTC(2030, 0, 1, i)).toISOString()),
        SETTINGS,
        () => 0,
      );
      kinds.push(verdict.alert);
      prior = verdict.streak;
    }
    expect(kinds).toEqual([
      'first-failure',
      'suppressed',
      'suppressed',
      'suppressed',
      'quarantine',
      'suppressed',
    ]);
    expect(prior).toMatchObject({
      consecutive: 6,
      firstAt: '2030-01-01T00:00:00.000Z',
      quarantinedAt: '2030-01-01T04:00:00.000Z',
    });
  });

  it('a repeat past remindEvery is a reminder', () => {
    const first = nextFailure(undefined, facts('2030-01-01T00:00:00.000Z'), SETTINGS, () => 0);
    expect(nextFailure(first.streak, facts('2030-01-02T00:00:00.000Z'), SETTINGS).alert).toBe('reminder');
  });

  it('an intent-marked failure is never quarantined or backed off, and always alerts', () => {
    let prior;
    for (let i = 0; i < 10; i++) {
      const verdict = nextFailure(
        prior,
        { ...facts(new Date(Date.UTC(2030, 0, 1, 0, i)).toISOString()), intentMarked: true },
        SETTINGS,
      );
      expect(verdict.alert).toBe('every-time');
      expect(verdict.record.quarantinedAt).toBeUndefined();
      expect(verdict.record.nextAttemptAt).toBeUndefined();
      prior = verdict.streak;
    }
  });

  it('an intent marker lets an automatic attempt through whatever the streak says', () => {
    const quarantined = {
      rotationId: 'r',
      step: 'lock',
      errorCode: 'X',
      at: '2030-01-01T00:00:00.000Z',
      consecutive: 9,
      quarantinedAt: '2030-01-01T00:00:00.000Z',
    };
    expect(
      automaticAttemptGate({ lastFailure: quarantined }, new Date('2030-01-01T01:00:00.000Z')).kind,
    ).toBe('quarantined');
    expect(
      automaticAttemptGate(
        {
          lastFailure: quarantined,
          intent: { rotationId: 'r2', keyId: 'k', owner: 'o', startedAt: '2030-01-01T00:30:00.000Z' },
        },
        new Date('2030-01-01T01:00:00.000Z'),
      ).kind,
    ).toBe('go');
  });
});
