// The token buckets of this process, one per quota and scope (AWS: per endpoint, region and quota
// group), so every backend instance and every key that spends the same budget waits in one line.
// Keyed by the rate too: two backends that state different quotas for one scope are paced apart.
import { TokenBucket, type TokenBucketOptions } from './token-bucket.ts';

const buckets = new Map<string, TokenBucket>();

export function sharedBucket(scope: string, options: TokenBucketOptions): TokenBucket {
  const key = `${scope}\n${String(options.ratePerSecond)}\n${String(options.burst ?? '')}`;
  let bucket = buckets.get(key);
  if (bucket === undefined) {
    bucket = new TokenBucket(options);
    buckets.set(key, bucket);
  }
  return bucket;
}
