import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  MAX_TAG_VALUE_LENGTH,
  creationTags,
  escapeTagField,
  failureTagValue,
  intentTagValue,
  joinTagFields,
  keyIdTagValue,
  parseFailureTag,
  parseIntentTag,
  parseKeyIdTag,
  parseProbeTag,
  probeTagValue,
  splitTagFields,
  streakTagValue,
  unescapeTagField,
} from '../../../src/backends/aws/record-tags.ts';

// The alphabet tag policies and other AWS services accept in tag values.
const PORTABLE = /^[A-Za-z0-9 _.:/=+@-]*$/;

describe('aws tag encoding', () => {
  it('round-trips any field through escape and unescape', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme' }), (field) => {
        expect(unescapeTagField(escapeTagField(field))).toBe(field);
      }),
    );
  });

  it('escapes every field to the portable alphabet without spaces', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (field) => {
        const escaped = escapeTagField(field);
        expect(escaped).toMatch(PORTABLE);
        expect(escaped).not.toContain(' ');
      }),
    );
  });

  it('keeps identifiers, times and error codes readable as they are', () => {
    const value = joinTagFields([
      '3f2c8a4e-1b7d-4e0a-9c55-0a1b2c3d4e5f',
      '2030-01-01T00:00:00.000Z',
      'KR_BACKEND_DENIED',
      'host-1/42/ab',
    ]);
    expect(value).toBe(
      '3f2c8a4e-1b7d-4e0a-9c55-0a1b2c3d4e5f 2030-01-01T00:00:00.000Z KR_BACKEND_DENIED host-1/42/ab',
    );
  });

  it('fits long fields in 256 characters by cutting the last ones, never the first', () => {
    fc.assert(
      fc.property(
        fc.uuid(),
        fc.string({ unit: 'grapheme', maxLength: 300 }),
        fc.string({ unit: 'grapheme', maxLength: 300 }),
        (id, a, b) => {
          const value = joinTagFields([id, a, b]);
          expect(value.length).toBeLessThanOrEqual(MAX_TAG_VALUE_LENGTH);
          expect(splitTagFields(value)[0]).toBe(id);
        },
      ),
    );
  });

  it('round-trips an intent marker, whatever the key id and owner hold', () => {
    const intent = {
      rotationId: 'rot-1',
      startedAt: '2030-01-01T00:00:00.000Z',
      keyId: 'key id|{"x":1}',
      owner: 'hôte/1/@x',
    };
    expect(parseIntentTag(intentTagValue(intent))).toEqual(intent);
  });

  it('round-trips holdUntil, and keeps it whole when the key id and owner must be cut', () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'grapheme', maxLength: 300 }),
        fc.string({ unit: 'grapheme', maxLength: 300 }),
        (keyId, owner) => {
          const intent = {
            rotationId: 'rot-hold',
            startedAt: '2030-01-01T00:00:00.000Z',
            keyId,
            owner,
            holdUntil: '2030-01-01T00:10:00.000Z',
          };
          const value = intentTagValue(intent);
          expect(value.length).toBeLessThanOrEqual(MAX_TAG_VALUE_LENGTH);
          expect(parseIntentTag(value)).toMatchObject({
            rotationId: 'rot-hold',
            holdUntil: '2030-01-01T00:10:00.000Z',
          });
        },
      ),
    );
  });

  it('reads a marker written before holdUntil existed (four fields) as one without it', () => {
    const old = '3f2c8a4e-1b7d-4e0a-9c55-0a1b2c3d4e5f 2030-01-01T00:00:00.000Z key_demo_billing host-1/42/ab';
    const intent = parseIntentTag(old);
    expect(intent).toEqual({
      rotationId: '3f2c8a4e-1b7d-4e0a-9c55-0a1b2c3d4e5f',
      startedAt: '2030-01-01T00:00:00.000Z',
      keyId: 'key_demo_billing',
      owner: 'host-1/42/ab',
    });
    expect(intent).not.toHaveProperty('holdUntil');
    // ... and writes a marker without holdUntil in that same four-field form.
    if (intent === undefined) throw new Error('expected an intent');
    expect(intentTagValue(intent)).toBe(old);
  });

  it("round-trips a leak's reason, with or without holdUntil, and keeps both whole when other fields are cut", () => {
    const base = { rotationId: 'rot-leak', startedAt: '2030-01-01T00:00:00.000Z', keyId: 'k', owner: 'o' };
    const leak = { ...base, reason: 'leak' };
    expect(intentTagValue(leak)).toBe('rot-leak 2030-01-01T00:00:00.000Z k o  leak');
    expect(parseIntentTag(intentTagValue(leak))).toEqual(leak);
    const held = { ...base, holdUntil: '2030-01-01T00:10:00.000Z', reason: 'compromise' };
    expect(parseIntentTag(intentTagValue(held))).toEqual(held);
    const long = { ...held, keyId: 'k'.repeat(300), owner: 'o'.repeat(300) };
    const value = intentTagValue(long);
    expect(value.length).toBeLessThanOrEqual(MAX_TAG_VALUE_LENGTH);
    expect(parseIntentTag(value)).toMatchObject({ holdUntil: held.holdUntil, reason: 'compromise' });
  });

  it("round-trips a leak marker's stored fingerprint after its reason, kept whole when other fields are cut", () => {
    const base = { rotationId: 'rot-leak', startedAt: '2030-01-01T00:00:00.000Z', keyId: 'k', owner: 'o' };
    const leak = { ...base, reason: 'leak', storedFingerprint: '0123456789ab' };
    expect(intentTagValue(leak)).toBe('rot-leak 2030-01-01T00:00:00.000Z k o  leak 0123456789ab');
    expect(parseIntentTag(intentTagValue(leak))).toEqual(leak);
    const held = {
      ...leak,
      holdUntil: '2030-01-01T00:10:00.000Z',
      keyId: 'k'.repeat(300),
      owner: 'o'.repeat(300),
    };
    const value = intentTagValue(held);
    expect(value.length).toBeLessThanOrEqual(MAX_TAG_VALUE_LENGTH);
    expect(parseIntentTag(value)).toMatchObject({
      holdUntil: held.holdUntil,
      reason: 'leak',
      storedFingerprint: '0123456789ab',
    });
  });

  it('reads a five-field marker (holdUntil, before reason existed) as one without a reason', () => {
    const old = 'rot-5 2030-01-01T00:00:00.000Z k o 2030-01-01T00:10:00.000Z';
    const intent = parseIntentTag(old);
    expect(intent).not.toHaveProperty('reason');
    if (intent === undefined) throw new Error('expected an intent');
    expect(intentTagValue(intent)).toBe(old);
  });

  it('round-trips a failure record', () => {
    const failure = {
      rotationId: 'rot-2',
      step: 'store',
      errorCode: 'KR_BACKEND_UNAVAILABLE',
      at: '2030-01-02T00:00:00.000Z',
    };
    expect(parseFailureTag(failureTagValue(failure))).toEqual(failure);
  });

  it('round-trips a failure streak in its own tag, within the portable alphabet and 256 characters', () => {
    const failure = {
      rotationId: '2f1d8a52-5b8e-4c1a-9d7e-0123456789ab',
      step: 'preflight',
      errorCode: 'KR_BACKEND_DENIED',
      at: '2030-01-02T05:00:00.000Z',
      consecutive: 12,
      firstAt: '2030-01-01T00:00:00.000Z',
      quarantinedAt: '2030-01-02T01:00:00.000Z',
      lastAlertedAt: '2030-01-02T01:00:00.000Z',
    };
    const streak = streakTagValue(failure);
    expect(streak.length).toBeLessThanOrEqual(MAX_TAG_VALUE_LENGTH);
    expect(streak).toMatch(/^[A-Za-z0-9 _.:/=+@-]*$/);
    // The last-failure tag keeps its four fields, so older keyrolls read it as before.
    expect(parseFailureTag(failureTagValue(failure))).toEqual({
      rotationId: failure.rotationId,
      step: 'preflight',
      errorCode: 'KR_BACKEND_DENIED',
      at: failure.at,
    });
    expect(parseFailureTag(failureTagValue(failure), streak)).toEqual(failure);
    // A record without a streak writes an empty streak tag, which reads as none.
    expect(streakTagValue({ rotationId: 'r', step: 's', errorCode: 'E', at: failure.at })).toBe('');
    expect(parseFailureTag(failureTagValue(failure), '')).not.toHaveProperty('consecutive');
  });

  it('round-trips any key id that fits, and records one too long as no key id rather than cut to another', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 300 }), (keyId) => {
        const value = keyIdTagValue(keyId);
        expect(value.length).toBeLessThanOrEqual(MAX_TAG_VALUE_LENGTH);
        expect(value).toMatch(PORTABLE);
        expect(parseKeyIdTag(value)).toBe(value === '' ? undefined : keyId);
      }),
    );
    expect(parseKeyIdTag(keyIdTagValue('key_demo_billing_b'))).toBe('key_demo_billing_b');
    expect(keyIdTagValue('k'.repeat(257))).toBe('');
    expect(keyIdTagValue(undefined)).toBe('');
  });

  it('round-trips a probe record and reads an unknown result as no probe', () => {
    const probe = { at: '2030-01-02T00:00:00.000Z', result: 'dead' } as const;
    expect(probeTagValue(probe)).toBe('2030-01-02T00:00:00.000Z dead');
    expect(parseProbeTag(probeTagValue(probe))).toEqual(probe);
    expect(parseProbeTag('2030-01-02T00:00:00.000Z maybe')).toBeUndefined();
    expect(parseProbeTag('')).toBeUndefined();
  });

  it("reads a failure record that is not keyroll's format as it is, for the record schema to judge (never dropped in silence)", () => {
    expect(parseFailureTag('x')).toEqual({ rotationId: 'x', at: '', errorCode: '', step: '' });
    expect(parseFailureTag('r 2030-01-02T00:00:00.000Z E s', 'seven 2030-01-01T00:00:00.000Z - x x')).toEqual(
      {
        rotationId: 'r',
        at: '2030-01-02T00:00:00.000Z',
        errorCode: 'E',
        step: 's',
        consecutive: Number.NaN,
        firstAt: '2030-01-01T00:00:00.000Z',
        quarantinedAt: 'x',
        lastAlertedAt: 'x',
      },
    );
  });

  it('ignores a marker with missing fields instead of inventing them', () => {
    expect(parseIntentTag('only-an-id')).toBeUndefined();
    expect(parseFailureTag('')).toBeUndefined();
  });

  it('always tags created secrets managed-by=keyroll, even over a configured managed-by', () => {
    expect(creationTags({ team: 'platform', 'managed-by': 'terraform' })).toEqual([
      { Key: 'team', Value: 'platform' },
      { Key: 'managed-by', Value: 'keyroll' },
    ]);
  });
});
