// The AWS lock's release mark (issue 27 §2): a `keyroll:lock-released` tag frees a held lock only
// with the release key whose digest the lock value carries; one that only names the lock is forged.
import { describe, expect, it } from 'vitest';
import {
  forgedReleaseMark,
  lockToken,
  newReleaseKey,
  parseLockToken,
  releaseDigestOf,
  releaseProves,
  type HeldValue,
} from '../../../../src/backends/aws/lock/value.ts';
import { lockReleasedTagValue, parseReleaseMark } from '../../../../src/backends/aws/record-tags.ts';

const key = newReleaseKey();
const held: HeldValue = {
  state: 'held',
  owner: 'host/1/ab',
  rotationId: 'rot-a',
  expiresAt: '2030-01-01T00:00:00.000Z',
  releaseDigest: releaseDigestOf(key),
};
const legacy: HeldValue = {
  state: 'held',
  owner: 'host/1/ab',
  rotationId: 'rot-a',
  expiresAt: '2030-01-01T00:00:00.000Z',
};
const intent = { owner: 'host/1/ab', rotationId: 'rot-a' };

describe('the AWS lock release mark', () => {
  it('frees the held lock with its release key, and with nothing less', () => {
    const genuine = parseReleaseMark(
      lockReleasedTagValue({ owner: held.owner, rotationId: held.rotationId, releaseKey: key }),
    );
    expect(releaseProves(genuine, held)).toBe(true);
    expect(forgedReleaseMark(genuine, held, undefined)).toBe(false);
    // What a tag writer can copy from the intent marker: owner and rotation.
    const copied = parseReleaseMark('host/1/ab rot-a');
    expect(releaseProves(copied, held)).toBe(false);
    expect(releaseProves(parseReleaseMark(`host/1/ab rot-a ${newReleaseKey()}`), held)).toBe(false);
    // The digest is public to readers of the lock value; it is not the key.
    expect(releaseProves(parseReleaseMark(`host/1/ab rot-a ${held.releaseDigest ?? ''}`), held)).toBe(false);
  });

  it('counts a mark as forged when it names the held lock or a set intent marker without the key', () => {
    const copied = parseReleaseMark('host/1/ab rot-a');
    expect(forgedReleaseMark(copied, held, undefined)).toBe(true);
    expect(forgedReleaseMark(copied, undefined, intent)).toBe(true);
    // A mark of another (finished) rotation is stale, not forged.
    expect(forgedReleaseMark(parseReleaseMark('host/2/cd rot-old'), held, undefined)).toBe(false);
    // An earlier keyroll's lock and mark (no digest, no key): neither frees nor counts as forged.
    expect(releaseProves(copied, legacy)).toBe(false);
    expect(forgedReleaseMark(copied, legacy, undefined)).toBe(false);
  });

  it('keeps the release key in the token, next to the place and version', () => {
    expect(parseLockToken(lockToken('target', 'v-1', key))).toEqual({
      kind: 'target',
      versionId: 'v-1',
      releaseKey: key,
    });
    expect(parseLockToken(lockToken('companion', 'v-2', undefined))).toEqual({
      kind: 'companion',
      versionId: 'v-2',
    });
  });
});
