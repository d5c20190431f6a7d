// Sharding for large fleets: N runners (Kubernetes Indexed Job completions) each rotate the keys
// whose id hashes to their index. The hash depends on the key id alone, so a key stays in its
// shard when other keys are added or removed, and every runner computes the same split without
// talking to the others. The backend lock still guards against overlaps (a manual run, a
// changed N mid-rollout).
import { createHash } from 'node:crypto';
import { UsageError } from '../errors.ts';

export interface Shard {
  /** 0-based index of this runner. */
  index: number;
  /** Number of runners. */
  total: number;
}

/** A generous ceiling: beyond this, per-runner overhead outweighs any gain. */
export const MAX_SHARDS = 10_000;

/** Parses `--shard i/N` (0 <= i < N). Throws UsageError (exit 2). */
export function parseShard(text: string): Shard {
  const match = /^(\d+)\/(\d+)$/.exec(text.trim());
  if (match === null)
    throw new UsageError(
      `--shard ${JSON.stringify(text)} must look like i/N, e.g. 0/4 (index i of N shards, counting from 0)`,
    );
  const index = Number(match[1]);
  const total = Number(match[2]);
  if (total < 1 || total > MAX_SHARDS)
    throw new UsageError(`--shard ${text}: the number of shards must be between 1 and ${MAX_SHARDS}`);
  if (index >= total)
    throw new UsageError(`--shard ${text}: the index must be below the number of shards (0 to ${total - 1})`);
  return { index, total };
}

/** True when `keyId` belongs to `shard`: the first 8 bytes of sha256(keyId), as an integer, mod N. */
export function keyInShard(keyId: string, shard: Shard): boolean {
  return shardOf(keyId, shard.total) === shard.index;
}

/** The shard index of `keyId` among `total` shards. */
export function shardOf(keyId: string, total: number): number {
  const digest = createHash('sha256').update(keyId, 'utf8').digest();
  return Number(digest.readBigUInt64BE(0) % BigInt(total));
}
