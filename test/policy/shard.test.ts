import { describe, expect, it } from 'vitest';
import { keyInShard, parseShard, shardOf } from '../../src/policy/shard.ts';

const KEY_IDS = Array.from(
  { length: 2000 },
  (_, index) => `key_${index.toString(36)}_${(index * 7919).toString(16)}`,
);

describe('parseShard', () => {
  it.each([
    ['0/1', { index: 0, total: 1 }],
    ['3/4', { index: 3, total: 4 }],
    ['0/10000', { index: 0, total: 10_000 }],
  ])('%s', (text, shard) => {
    expect(parseShard(text)).toEqual(shard);
  });

  it.each([
    ['4/4', '--shard 4/4: the index must be below the number of shards (0 to 3)'],
    ['0/0', '--shard 0/0: the number of shards must be between 1 and 10000'],
    ['1/10001', '--shard 1/10001: the number of shards must be between 1 and 10000'],
    ['-1/4', '--shard "-1/4" must look like i/N, e.g. 0/4 (index i of N shards, counting from 0)'],
    ['1', '--shard "1" must look like i/N, e.g. 0/4 (index i of N shards, counting from 0)'],
    ['a/b', '--shard "a/b" must look like i/N, e.g. 0/4 (index i of N shards, counting from 0)'],
    ['1.5/4', '--shard "1.5/4" must look like i/N, e.g. 0/4 (index i of N shards, counting from 0)'],
  ])('refuses %s as a usage error', (text, message) => {
    expect(() => parseShard(text)).toThrow(expect.objectContaining({ code: 'KR_USAGE', message }) as Error);
  });
});

describe('keyInShard', () => {
  it.each([1, 2, 3, 7, 16])('puts every key in exactly one of %d shards', (total) => {
    const ownerCounts = KEY_IDS.map(
      (keyId) =>
        Array.from({ length: total }, (_, index) => index).filter((index) =>
          keyInShard(keyId, { index, total }),
        ).length,
    );
    expect(ownerCounts.every((count) => count === 1)).toBe(true);
  });

  it('spreads keys roughly evenly', () => {
    const total = 8;
    const counts = Array.from({ length: total }, () => 0);
    for (const keyId of KEY_IDS) counts[shardOf(keyId, total)]! += 1;
    const expected = KEY_IDS.length / total;
    for (const count of counts) expect(Math.abs(count - expected)).toBeLessThan(expected * 0.25);
  });

  it('depends on the key id alone, pinned so a changed hash (which would move keys between shards) fails loudly', () => {
    // sha256("key_demo_billing") begins 9bf329c679e4cd29; that 64-bit integer mod N.
    expect([2, 3, 4, 5, 7].map((total) => shardOf('key_demo_billing', total))).toEqual([1, 2, 1, 2, 4]);
    expect(shardOf('key_demo_billing', 1)).toBe(0);
  });
});
