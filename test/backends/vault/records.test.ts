// keyroll's records in Vault custom_metadata (src/backends/vault/records.ts): one that does not
// decode is noted as a doubt for the engine to audit, never dropped in silence (issue 18 §3).
import { describe, expect, it } from 'vitest';
import { META, encodeFailure, encodeIntent, stateFromMetadata } from '../../../src/backends/vault/records.ts';

describe('vault bookkeeping records', () => {
  it('read as written', () => {
    const failure = {
      rotationId: 'r',
      step: 'preflight',
      errorCode: 'KR_BACKEND_DENIED',
      at: '2030-01-02T00:00:00.000Z',
      consecutive: 2,
    };
    expect(stateFromMetadata({ [META.lastFailure]: encodeFailure(failure) })).toEqual({
      lastFailure: failure,
    });
  });

  it("keep a leak marker's reason and stored fingerprint, and read a marker of an older keyroll (no reason) as before", () => {
    const old = { rotationId: 'r', keyId: 'k', owner: 'o', startedAt: '2030-01-02T00:00:00.000Z' };
    const leak = {
      ...old,
      holdUntil: '2030-01-02T00:10:00.000Z',
      reason: 'leak',
      storedFingerprint: '0123456789ab',
    };
    expect(stateFromMetadata({ [META.intent]: encodeIntent(leak) }).intent).toEqual(leak);
    expect(stateFromMetadata({ [META.intent]: JSON.stringify(old) }).intent).toEqual(old);
    expect(JSON.parse(encodeIntent(old))).not.toHaveProperty('reason');
  });

  it('note each record that is not JSON of its shape, and leave it out', () => {
    const state = stateFromMetadata({
      [META.lastFailure]: JSON.stringify({
        rotationId: 'r',
        step: 's',
        errorCode: 'E',
        at: '2030-01-02T00:00:00.000Z',
        consecutive: '7',
      }),
      [META.lastProbe]: '{not json',
      [META.intent]: JSON.stringify({ rotationId: 'r' }),
      [META.lastRotatedAt]: 'x',
    });
    expect(state).toEqual({
      // The rotation time is a plain string here; trustState (src/rotation/trusted-state.ts) judges it.
      lastRotatedAt: 'x',
      doubts: [
        { record: 'intent', problem: 'malformed', action: 'ignored' },
        { record: 'lastFailure', problem: 'malformed', action: 'ignored' },
        { record: 'lastProbe', problem: 'malformed', action: 'ignored' },
      ],
    });
  });
});
