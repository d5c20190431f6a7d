import { describe, expect, it } from 'vitest';
import { decideDue } from '../../src/policy/due.ts';
import type { KeyPolicy } from '../../src/policy/schema.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

function keyWith(overrides: Partial<KeyPolicy>): KeyPolicy {
  return {
    id: 'key_a',
    organizationId: 'org_a',
    destinations: [
      {
        backend: 'files',
        target: { path: 'a.json', shape: { format: 'json', secretField: 'apiKey', fields: [] } },
      },
    ],
    fallbacks: [],
    timezone: 'UTC',
    minIntervalMs: HOUR,
    lockTtlMs: 15 * 60_000,
    clockSkewMs: 0,
    verify: { readBack: true, apiCall: true },
    store: { attempts: 5, initialBackoffMs: 200, maxBackoffMs: 5_000 },
    notify: { onFailure: [], onSuccess: [] },
    labels: {},
    onDrift: 'rotate',
    ...overrides,
  };
}

const at = (iso: string): Date => new Date(iso);
const daily3am = keyWith({ schedule: '0 3 * * *' });
const weeklyMaxAge = keyWith({ maxAgeMs: 7 * DAY });

describe('decideDue', () => {
  it('never rotated: due at once, with no minimum interval to wait for', () => {
    const decision = decideDue(daily3am, {}, at('2025-01-02T12:00:00Z'));
    expect(decision).toEqual({
      due: true,
      reasons: ['never-rotated'],
      nextRunAt: at('2025-01-03T03:00:00Z'),
      heldByMinInterval: false,
      overdue: false,
    });
  });

  it('an unparseable lastRotatedAt counts as never rotated', () => {
    expect(decideDue(daily3am, { lastRotatedAt: 'yesterday' }, at('2025-01-02T12:00:00Z')).reasons).toEqual([
      'never-rotated',
    ]);
  });

  it('schedule passed: an occurrence after the last rotation, at or before now', () => {
    const decision = decideDue(
      daily3am,
      { lastRotatedAt: '2025-01-01T03:00:05Z' },
      at('2025-01-02T03:00:00Z'),
    );
    expect(decision).toEqual({
      due: true,
      reasons: ['schedule'],
      nextRunAt: at('2025-01-03T03:00:00Z'),
      notBefore: at('2025-01-01T04:00:05Z'),
      heldByMinInterval: false,
      overdue: false,
    });
  });

  it('schedule not yet: the next occurrence is still ahead', () => {
    const decision = decideDue(
      daily3am,
      { lastRotatedAt: '2025-01-01T03:00:05Z' },
      at('2025-01-02T02:59:59Z'),
    );
    expect(decision.due).toBe(false);
    expect(decision.reasons).toEqual([]);
    expect(decision.nextRunAt).toEqual(at('2025-01-02T03:00:00Z'));
  });

  it('a manual rotation after the occurrence satisfies it', () => {
    const decision = decideDue(
      daily3am,
      { lastRotatedAt: '2025-01-02T09:00:00Z' },
      at('2025-01-02T23:00:00Z'),
    );
    expect(decision.due).toBe(false);
  });

  it('overdue: two occurrences passed since the last rotation', () => {
    const decision = decideDue(
      daily3am,
      { lastRotatedAt: '2025-01-01T03:00:05Z' },
      at('2025-01-03T03:00:00Z'),
    );
    expect(decision).toMatchObject({ due: true, reasons: ['schedule'], overdue: true });
  });

  it('max age: due once the last rotation is maxAge old, and then past it', () => {
    const last = '2025-01-01T00:00:00Z';
    const justBefore = decideDue(weeklyMaxAge, { lastRotatedAt: last }, at('2025-01-07T23:59:59.999Z'));
    expect(justBefore).toEqual({
      due: false,
      reasons: [],
      notBefore: at('2025-01-01T01:00:00Z'),
      maxAgeAt: at('2025-01-08T00:00:00Z'),
      heldByMinInterval: false,
      overdue: false,
    });
    const reached = decideDue(weeklyMaxAge, { lastRotatedAt: last }, at('2025-01-08T00:00:00Z'));
    expect(reached).toMatchObject({ due: true, reasons: ['max-age'], overdue: true });
    expect(reached.nextRunAt).toBeUndefined();
  });

  it('schedule and max age both count', () => {
    const key = keyWith({ schedule: '0 3 * * *', maxAgeMs: DAY });
    expect(
      decideDue(key, { lastRotatedAt: '2025-01-01T03:00:00Z' }, at('2025-01-02T03:00:00Z')).reasons,
    ).toEqual(['schedule', 'max-age']);
  });

  it('the minimum interval holds a due key back (no rotation loops)', () => {
    const hourly = keyWith({ schedule: '0 * * * *', minIntervalMs: 2 * HOUR });
    const held = decideDue(hourly, { lastRotatedAt: '2025-01-01T10:00:00Z' }, at('2025-01-01T11:05:00Z'));
    expect(held).toMatchObject({
      due: false,
      reasons: ['schedule'],
      heldByMinInterval: true,
      notBefore: at('2025-01-01T12:00:00Z'),
    });
    const released = decideDue(hourly, { lastRotatedAt: '2025-01-01T10:00:00Z' }, at('2025-01-01T12:00:00Z'));
    expect(released).toMatchObject({ due: true, reasons: ['schedule'], heldByMinInterval: false });
  });

  it('intent: a marker left behind makes the key due even inside the minimum interval', () => {
    const intent = {
      rotationId: 'rot_1',
      keyId: 'key_a',
      owner: 'host/1',
      startedAt: '2025-01-02T09:55:00Z',
    };
    const decision = decideDue(
      daily3am,
      { lastRotatedAt: '2025-01-02T09:50:00Z', intent },
      at('2025-01-02T10:00:00Z'),
    );
    expect(decision).toMatchObject({
      due: true,
      reasons: ['intent'],
      heldByMinInterval: false,
      overdue: false,
    });
  });

  it('a null intent is no intent', () => {
    expect(
      decideDue(daily3am, { lastRotatedAt: '2025-01-02T09:50:00Z', intent: null }, at('2025-01-02T10:00:00Z'))
        .due,
    ).toBe(false);
  });

  it('reads the schedule in the key time zone', () => {
    // 03:00 in Berlin is 02:00Z in winter (CET) and 01:00Z in summer (CEST).
    const berlin = keyWith({ schedule: '0 3 * * *', timezone: 'Europe/Berlin' });
    const last = { lastRotatedAt: '2025-01-01T03:30:00Z' };
    expect(decideDue(berlin, last, at('2025-01-02T01:59:59Z')).due).toBe(false);
    expect(decideDue(berlin, last, at('2025-01-02T02:00:00Z')).due).toBe(true);
    expect(decideDue(daily3am, last, at('2025-01-02T02:00:00Z')).due).toBe(false);
    expect(
      decideDue(berlin, { lastRotatedAt: '2025-07-01T01:00:00Z' }, at('2025-07-01T12:00:00Z')).nextRunAt,
    ).toEqual(at('2025-07-02T01:00:00Z'));
  });

  it('a last rotation in the future (clock skew) is not due', () => {
    const decision = decideDue(
      keyWith({ schedule: '0 3 * * *', maxAgeMs: DAY }),
      { lastRotatedAt: '2025-01-05T00:00:00Z' },
      at('2025-01-04T00:00:00Z'),
    );
    expect(decision).toMatchObject({ due: false, reasons: [], overdue: false });
  });
});
