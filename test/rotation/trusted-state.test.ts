// What keyroll believes of a key's bookkeeping (issue 18 §3): every field of every record it reads
// back is parsed with the record schemas, and a malformed or future time counts as absent, which
// means "attempt now, alert now", never "stay quiet".
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type { z } from 'zod';
import type * as Schema from '../../src/backends/schema.ts';
import type { FailureRecord, Intent, KeyState, LockInfo, ProbeRecord } from '../../src/backends/types.ts';
import type { FailureSettings } from '../../src/policy/schema.ts';
import {
  automaticAttemptGate,
  quarantineReminderDue,
  streakView,
} from '../../src/rotation/failure-streak.ts';
import { trustState } from '../../src/rotation/trusted-state.ts';

const HOUR = 3600_000;
const NOW = new Date('2030-06-01T12:00:00.000Z');
const FAILURES: FailureSettings = {
  backoffInitialMs: HOUR,
  backoffCapMs: 24 * HOUR,
  jitter: 0,
  quarantineAfter: 5,
  remindEveryMs: 24 * HOUR,
};
const KEY = { clockSkewMs: 10_000, failures: FAILURES };
const ago = (ms: number): string => new Date(NOW.getTime() - ms).toISOString();

/** A quarantine keyroll itself would have written: 5 failures, alerted an hour ago. */
const quarantine: FailureRecord = {
  rotationId: 'r5',
  step: 'preflight',
  errorCode: 'KR_BACKEND_DENIED',
  at: ago(2 * HOUR),
  consecutive: 5,
  firstAt: ago(30 * HOUR),
  quarantinedAt: ago(2 * HOUR),
  lastAlertedAt: ago(HOUR),
};
const trust = (state: Omit<KeyState, 'exists'>): KeyState => trustState({ exists: true, ...state }, KEY, NOW);

describe('the record schemas', () => {
  it('parse exactly the fields of the records KeyState carries', () => {
    expectTypeOf<z.infer<typeof Schema.Intent>>().toEqualTypeOf<Intent>();
    expectTypeOf<z.infer<typeof Schema.LockInfo>>().toEqualTypeOf<LockInfo>();
    expectTypeOf<z.infer<typeof Schema.ProbeRecord>>().toEqualTypeOf<ProbeRecord>();
    expectTypeOf<z.infer<typeof Schema.FailureRecord>>().toEqualTypeOf<FailureRecord>();
  });

  it('every reader of a key state outside the backends goes through trustState', async () => {
    const src = fileURLToPath(new URL('../../src/', import.meta.url));
    const files = (await readdir(src, { recursive: true })).filter(
      (file) => file.endsWith('.ts') && !file.startsWith('backends/'),
    );
    const readers: string[] = [];
    for (const file of files)
      if ((await readFile(join(src, file), 'utf8')).includes('.readState(')) readers.push(file);
    // identify.ts reads only lastKeyId, which activeSlot checks against the policy's two slots.
    expect(readers.sort()).toEqual([
      'leaks/identify.ts',
      'rotation/step-decide.ts',
      'rotation/trusted-state.ts',
    ]);
  });
});

describe('a failure record', () => {
  it('written by keyroll is trusted as it is', () => {
    expect(trust({ lastFailure: quarantine })).toEqual({ exists: true, lastFailure: quarantine });
  });

  it('with a quarantine time that is not a time does not quarantine, and cannot prove it alerted', () => {
    const state = trust({ lastFailure: { ...quarantine, quarantinedAt: 'x' } });
    expect(state.lastFailure?.quarantinedAt).toBeUndefined();
    expect(state.lastFailure?.lastAlertedAt).toBeUndefined();
    expect(automaticAttemptGate(state, NOW)).toEqual({ kind: 'go' });
    expect(state.doubts).toEqual([
      { record: 'lastFailure', field: 'quarantinedAt', problem: 'malformed', action: 'ignored' },
    ]);
  });

  it('with a last alert of "x" or in the future makes the quarantine reminder due now', () => {
    for (const lastAlertedAt of ['x', '2099-01-01T00:00:00.000Z']) {
      const state = trust({ lastFailure: { ...quarantine, lastAlertedAt } });
      const gate = automaticAttemptGate(state, NOW);
      expect(gate.kind).toBe('quarantined');
      if (gate.kind === 'quarantined') expect(quarantineReminderDue(gate.streak, FAILURES, NOW)).toBe(true);
      expect(state.doubts?.[0]).toMatchObject({
        record: 'lastFailure',
        field: 'lastAlertedAt',
        action: 'ignored',
      });
    }
    // The time keyroll shows for it is the one the record said.
    expect(trust({ lastFailure: { ...quarantine, lastAlertedAt: '2099-01-01T00:00:00Z' } }).doubts).toEqual([
      {
        record: 'lastFailure',
        field: 'lastAlertedAt',
        problem: 'future',
        action: 'ignored',
        value: '2099-01-01T00:00:00.000Z',
      },
    ]);
  });

  it('with a quarantine dated in the future does not quarantine', () => {
    const state = trust({ lastFailure: { ...quarantine, quarantinedAt: '2099-01-01T00:00:00.000Z' } });
    expect(automaticAttemptGate(state, NOW).kind).toBe('go');
    expect(streakView({ ...state })?.quarantinedAt).toBeNull();
  });

  it('keeps a quarantine only with a reason and a time status can show', () => {
    const view = streakView(trust({ lastFailure: quarantine }));
    expect(view).toMatchObject({
      quarantinedAt: quarantine.quarantinedAt,
      lastStep: 'preflight',
      lastErrorCode: 'KR_BACKEND_DENIED',
    });
    // Without what failed, the record is no streak at all.
    for (const broken of [
      { errorCode: '' },
      { step: '' },
      { at: 'yesterday' },
      { consecutive: -1 },
      { consecutive: Number.NaN },
    ]) {
      const state = trust({ lastFailure: { ...quarantine, ...broken } });
      expect(state.lastFailure, JSON.stringify(broken)).toBeUndefined();
      expect(automaticAttemptGate(state, NOW)).toEqual({ kind: 'go' });
      expect(state.doubts?.[0]).toMatchObject({
        record: 'lastFailure',
        problem: 'malformed',
        action: 'ignored',
      });
    }
  });

  it('dated in the future is ignored whole: a later rotation would never end its streak', () => {
    const state = trust({
      lastRotatedAt: ago(HOUR),
      lastFailure: { ...quarantine, at: '2099-01-01T00:00:00.000Z' },
    });
    expect(state.lastFailure).toBeUndefined();
    expect(state.doubts).toEqual([
      {
        record: 'lastFailure',
        field: 'at',
        problem: 'future',
        action: 'ignored',
        value: '2099-01-01T00:00:00.000Z',
      },
    ]);
  });

  it('with a backoff far beyond the policy cap is held to the cap after its failure', () => {
    const failure: FailureRecord = {
      rotationId: 'r1',
      step: 'roll',
      errorCode: 'KR_API_SERVER_ERROR',
      at: ago(2 * HOUR),
      consecutive: 1,
      firstAt: ago(2 * HOUR),
      nextAttemptAt: '2099-01-01T00:00:00.000Z',
      lastAlertedAt: ago(2 * HOUR),
    };
    const state = trust({ lastFailure: failure });
    expect(state.lastFailure?.nextAttemptAt).toBe(new Date(Date.parse(failure.at) + 24 * HOUR).toISOString());
    expect(state.lastFailure?.lastAlertedAt).toBeUndefined();
    expect(state.doubts).toEqual([
      {
        record: 'lastFailure',
        field: 'nextAttemptAt',
        problem: 'beyond-policy',
        action: 'bounded',
        value: '2099-01-01T00:00:00.000Z',
      },
    ]);
    // Within the cap (and the clocks' skew), a backoff is the policy's own and stays.
    const fair = {
      ...failure,
      nextAttemptAt: new Date(Date.parse(failure.at) + 24 * HOUR + 5_000).toISOString(),
    };
    expect(trust({ lastFailure: fair })).toEqual({ exists: true, lastFailure: fair });
  });

  it('a time a little ahead, within the clock skew the policy allows, is no doubt', () => {
    const ahead = new Date(NOW.getTime() + 5_000).toISOString();
    expect(
      trust({ lastRotatedAt: ahead, lastFailure: { ...quarantine, lastAlertedAt: ahead } }).doubts,
    ).toBeUndefined();
  });
});

describe('the other records', () => {
  it('a last rotation that is not a time or lies in the future counts as none: the key is due by its age', () => {
    expect(trust({ lastRotatedAt: 'x', lastRotationId: 'r' })).toEqual({
      exists: true,
      lastRotationId: 'r',
      doubts: [{ record: 'lastRotatedAt', problem: 'malformed', action: 'ignored' }],
    });
    expect(trust({ lastRotatedAt: '2099-01-01T00:00:00.000Z' }).lastRotatedAt).toBeUndefined();
    expect(trust({ lastKeyId: '' }).doubts).toEqual([
      { record: 'lastKeyId', problem: 'malformed', action: 'ignored' },
    ]);
  });

  it('a probe in the future or of an unknown result counts as none: the drift check is due', () => {
    expect(
      trust({ lastProbe: { at: '2099-01-01T00:00:00.000Z', result: 'works' } }).lastProbe,
    ).toBeUndefined();
    expect(trust({ lastProbe: { at: ago(HOUR), result: 'maybe' as 'works' } }).lastProbe).toBeUndefined();
    expect(trust({ lastProbe: { at: ago(HOUR), result: 'dead' } }).lastProbe).toEqual({
      at: ago(HOUR),
      result: 'dead',
    });
  });

  it('a damaged intent marker is kept (a roll may have happened), only a holdUntil that is not a time is dropped', () => {
    const state = trust({
      intent: { rotationId: 'r', keyId: 'k', owner: 'o', startedAt: 'x', holdUntil: 'later' },
    });
    expect(state.intent).toEqual({ rotationId: 'r', keyId: 'k', owner: 'o', startedAt: 'x' });
    expect(state.doubts).toEqual([
      { record: 'intent', field: 'startedAt', problem: 'malformed', action: 'kept' },
      { record: 'intent', field: 'holdUntil', problem: 'malformed', action: 'ignored' },
    ]);
  });

  it("keeps a leak marker's reason, and drops one that is not a leak's (the marker is then no leak's)", () => {
    const marker = { rotationId: 'r', keyId: 'k', owner: 'o', startedAt: ago(HOUR) };
    expect(trust({ intent: { ...marker, reason: 'leak' } }).intent).toEqual({ ...marker, reason: 'leak' });
    expect(trust({ intent: { ...marker, reason: 'compromise' } }).intent).toEqual({
      ...marker,
      reason: 'compromise',
    });
    const odd = trust({ intent: { ...marker, reason: 'scheduled' } });
    expect(odd.intent).toEqual(marker);
    expect(odd.doubts).toEqual([
      { record: 'intent', field: 'reason', problem: 'malformed', action: 'ignored' },
    ]);
  });

  it("keeps a leak marker's stored fingerprint; drops one that is not a fingerprint, and one without a leak's reason", () => {
    const marker = { rotationId: 'r', keyId: 'k', owner: 'o', startedAt: ago(HOUR), reason: 'leak' };
    const exact = { ...marker, storedFingerprint: '0123456789ab' };
    expect(trust({ intent: exact }).intent).toEqual(exact);
    // Not a fingerprint (here a secret-length value): no value recovery could re-roll as the leaked one.
    const odd = trust({ intent: { ...marker, storedFingerprint: 'x'.repeat(40) } });
    expect(odd.intent).toEqual(marker);
    expect(odd.doubts).toEqual([
      { record: 'intent', field: 'storedFingerprint', problem: 'malformed', action: 'ignored' },
    ]);
    const { reason: _reason, ...noLeak } = exact;
    const { storedFingerprint: _fingerprint, ...plain } = noLeak;
    expect(trust({ intent: noLeak }).intent).toEqual(plain);
  });

  it('a lock entry that is not keyroll’s is not shown; doubts a backend noted are kept', () => {
    const state = trustState(
      {
        exists: true,
        lock: { owner: 'o', rotationId: 'r', expiresAt: 'soon' },
        doubts: [{ record: 'lastProbe', problem: 'malformed', action: 'ignored' }],
      },
      KEY,
      NOW,
    );
    expect(state).toEqual({
      exists: true,
      doubts: [
        { record: 'lastProbe', problem: 'malformed', action: 'ignored' },
        { record: 'lock', problem: 'malformed', action: 'ignored' },
      ],
    });
  });
});
