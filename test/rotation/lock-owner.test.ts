// The owner string of every key lock (src/rotation/lock-owner.ts): in a pod it names what a proof of
// the holder's death needs; outside one it keeps the old form, which nothing may prove dead.
import { describe, expect, it } from 'vitest';
import { lockOwnerOf, parsePodLockOwner, podIdentityOf } from '../../src/rotation/lock-owner.ts';

const POD_ENV = {
  POD_NAMESPACE: 'keyroll',
  POD_NAME: 'keyroll-7d9f8b6c5-x2x9q',
  POD_UID: '0b1c5f3e-7a43-4c1e-9b7d-2f6c1e0a9d11',
};
const STARTED = Date.parse('2026-11-29T10:06:50.125Z');

describe('the lock owner', () => {
  it('in a pod names the namespace, pod, UID, process start and pid, and parses back', () => {
    const owner = lockOwnerOf(POD_ENV, STARTED);
    expect(owner).toMatch(
      /^pod:keyroll\/keyroll-7d9f8b6c5-x2x9q\/0b1c5f3e-7a43-4c1e-9b7d-2f6c1e0a9d11\/2026-11-29T10:06:50\.125Z\/\d+\/[0-9a-f]{8}$/,
    );
    expect(parsePodLockOwner(owner)).toEqual({
      namespace: 'keyroll',
      name: 'keyroll-7d9f8b6c5-x2x9q',
      uid: POD_ENV.POD_UID,
      startedAtMs: STARTED,
      pid: process.pid,
    });
  });

  it('differs for every runtime of one process (the random part), so a dead owner never recurs', () => {
    expect(lockOwnerOf(POD_ENV, STARTED)).not.toBe(lockOwnerOf(POD_ENV, STARTED));
  });

  it('keeps the old host/pid/random form outside a pod, or without POD_UID, and that form never parses', () => {
    for (const env of [{}, { POD_NAMESPACE: 'keyroll', POD_NAME: 'keyroll-0' }]) {
      const owner = lockOwnerOf(env, STARTED);
      expect(owner).toMatch(new RegExp(`^[^/]+/${String(process.pid)}/[0-9a-f]{8}$`));
      expect(parsePodLockOwner(owner)).toBeUndefined();
    }
    expect(podIdentityOf({ POD_NAMESPACE: 'keyroll', POD_NAME: 'keyroll-0' })).toBeUndefined();
  });

  it('refuses a pod identity that could not be a pod (a slash, capitals) rather than write an owner that splits wrong', () => {
    expect(podIdentityOf({ ...POD_ENV, POD_NAME: 'a/b' })).toBeUndefined();
    expect(podIdentityOf({ ...POD_ENV, POD_NAMESPACE: 'KeyRoll' })).toBeUndefined();
    expect(lockOwnerOf({ ...POD_ENV, POD_NAME: 'a/b' }, STARTED).startsWith('pod:')).toBe(false);
  });

  it.each([
    ['an old-form owner', 'keyroll-7d9f8b6c5-x2x9q/1/abcd1234'],
    ['too few fields', 'pod:keyroll/keyroll-0/0b1c/2026-11-29T10:06:50.125Z/1'],
    ['too many fields', 'pod:keyroll/keyroll-0/0b1c/2026-11-29T10:06:50.125Z/1/ab/cd'],
    ['a start that is no ISO time', 'pod:keyroll/keyroll-0/0b1c/yesterday/1/abcd1234'],
    ['a start in another ISO spelling', 'pod:keyroll/keyroll-0/0b1c/2026-11-29T10:06:50Z/1/abcd1234'],
    ['a pid that is no number', 'pod:keyroll/keyroll-0/0b1c/2026-11-29T10:06:50.125Z/one/abcd1234'],
    ['an empty random part', 'pod:keyroll/keyroll-0/0b1c/2026-11-29T10:06:50.125Z/1/'],
    ['a UID that is no UID', 'pod:keyroll/keyroll-0/not a uid/2026-11-29T10:06:50.125Z/1/abcd1234'],
    ['an empty pod name', 'pod:keyroll//0b1c/2026-11-29T10:06:50.125Z/1/abcd1234'],
    ['unknown', 'unknown'],
  ])('does not parse %s (never proven dead)', (_why, owner) => {
    expect(parsePodLockOwner(owner)).toBeUndefined();
  });
});
