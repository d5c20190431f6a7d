// external-secrets' syncedResourceVersion, computed as its controller computes it. The vectors
// were produced by external-secrets' own code: GetResourceVersion / HashMeta
// (pkg/controllers/util/util.go, identical from v0.14.0 to v2.9.0) and ObjectHash
// (pkg/utils/utils.go: md5 up to v0.16.1, sha3.Sum224 from v0.16.2), copied verbatim into a Go
// program and run with Go 1.26; ObjectHash's own test vectors (utils_test.go TestObjectHash,
// "hello there" and nil) pin the two hashes.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  goMapString,
  metaString,
  syncedResourceVersions,
  syncedThisState,
} from '../../../src/consumers/kinds/external-secret-synced.ts';
import type { KubeObject } from '../../../src/consumers/kubernetes/client.ts';

function object(
  generation: number,
  annotations?: Record<string, string>,
  labels?: Record<string, string>,
  synced?: string,
): KubeObject {
  return {
    metadata: { generation, ...(annotations ? { annotations } : {}), ...(labels ? { labels } : {}) },
    status: synced === undefined ? {} : { syncedResourceVersion: synced },
  };
}

const VECTORS: { name: string; object: KubeObject; text: string; md5: string; sha3: string }[] = [
  {
    name: 'no annotations, no labels (nil maps)',
    object: object(1),
    text: '{annotations:map[] labels:map[]}',
    md5: '1-2f2c636d06132f67992c15a1daeb0a5f',
    sha3: '1-f47fe3c0b255b6dd8047cdffa772587bb829efe7a1cb70febeda2eb2',
  },
  {
    name: 'a force-sync annotation',
    object: object(1, { 'force-sync': '1732838400' }),
    text: '{annotations:map[force-sync:1732838400] labels:map[]}',
    md5: '1-965ed7b2a3768207655b4f4af486adce',
    sha3: '1-98a95b49e412eaa8cad2753b0f51ebe99c627adcb112d21dcdba31eb',
  },
  {
    name: 'kubectl apply, labels, values with spaces, colons, brackets and a newline',
    object: object(
      3,
      {
        team: 'billing',
        'kubectl.kubernetes.io/last-applied-configuration':
          '{"apiVersion":"external-secrets.io/v1","kind":"ExternalSecret"}\n',
        'force-sync': '1732838401',
      },
      { tier: 'a b:c]', 'app.kubernetes.io/name': 'billing' },
    ),
    text: '{annotations:map[force-sync:1732838401 kubectl.kubernetes.io/last-applied-configuration:{"apiVersion":"external-secrets.io/v1","kind":"ExternalSecret"}\n team:billing] labels:map[app.kubernetes.io/name:billing tier:a b:c]]}',
    md5: '3-b01750314293da4cf7a91e7de51dd520',
    sha3: '3-9baefbd49345c151601757fad3277306e5f0338a85fd2736ff0067a9',
  },
  {
    name: "keys in Go's byte order (upper case first, non-ASCII last), an empty value, empty labels",
    object: object(2, { zeta: '1', é: '4', alpha: '3', Alpha: '2', z: '' }, {}),
    text: '{annotations:map[Alpha:2 alpha:3 z: zeta:1 é:4] labels:map[]}',
    md5: '2-f205466b6e2c25ef0a557bcf0237f432',
    sha3: '2-9301b8fd159c40ac03de4521597fb92059f6ca13eff93f6514ddf29f',
  },
];

describe("external-secrets' syncedResourceVersion", () => {
  it('the two hashes are ObjectHash\'s: its own test vectors ("hello there", nil)', () => {
    expect(createHash('md5').update('hello there').digest('hex')).toBe('161bc25962da8fed6d2f59922fb642aa');
    expect(createHash('sha3-224').update('hello there').digest('hex')).toBe(
      'f78681ec611ebaeea0689bff6c7812a83ff98a7faba986d9af76c999',
    );
    // Go's %+v of a nil interface.
    expect(createHash('md5').update('<nil>').digest('hex')).toBe('60046f14c917c18a9a0f923e191ba0dc');
    expect(createHash('sha3-224').update('<nil>').digest('hex')).toBe(
      'c461202a18e99215f121936fb2452e03843828e448a00a53f285a6fc',
    );
  });

  for (const vector of VECTORS) {
    it(`${vector.name}: Go's %+v text and GetResourceVersion's value, md5 (≤ v0.16.1) and sha3-224 (v0.16.2+)`, () => {
      expect(metaString(vector.object)).toBe(vector.text);
      expect(syncedResourceVersions(vector.object)).toEqual({ md5: vector.md5, sha3: vector.sha3 });
    });
  }

  it('a nil map and an empty map print alike (map[])', () => {
    expect(goMapString(undefined)).toBe('map[]');
    expect(goMapString({})).toBe('map[]');
  });

  it('a status proves the current state only when its value is the one of the metadata as it is now', () => {
    const synced = object(
      1,
      { 'force-sync': '1732838400' },
      undefined,
      '1-98a95b49e412eaa8cad2753b0f51ebe99c627adcb112d21dcdba31eb',
    );
    expect(syncedThisState(synced)).toBe(true);
    expect(
      syncedThisState(
        object(1, { 'force-sync': '1732838400' }, undefined, '1-965ed7b2a3768207655b4f4af486adce'),
      ),
    ).toBe(true);
    // keyroll's next force-sync value: the status is from before it.
    expect(
      syncedThisState({
        ...synced,
        metadata: { generation: 1, annotations: { 'force-sync': '1732838401' } },
      }),
    ).toBe(false);
    // A spec change (a new generation) not synced yet.
    expect(
      syncedThisState({
        ...synced,
        metadata: { generation: 2, annotations: { 'force-sync': '1732838400' } },
      }),
    ).toBe(false);
    expect(syncedThisState(object(1, { 'force-sync': '1732838400' }))).toBe(false);
    expect(syncedThisState(object(1, { 'force-sync': '1732838400' }, undefined, '1-1732838400'))).toBe(false);
  });
});
