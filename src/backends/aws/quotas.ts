// AWS Secrets Manager's request quotas, per account and region, as AWS documents them ("AWS
// Secrets Manager quotas"; none is adjustable), and which quota each call keyroll makes counts
// against. The policy may state lower (or, for a test double, other) rates per backend.
import { z } from 'zod';
import type { RotationRole, RotationSpend } from '../rotation-spend.ts';
import type { AwsBackendConfig } from './config.ts';
import type { AwsAction } from './errors.ts';

export type AwsQuotaGroup = 'write' | 'tag' | 'read' | 'create';

/**
 * PutSecretValue, UpdateSecret and UpdateSecretVersionStage share 50 per second (with the
 * replication calls); TagResource and UntagResource 50; GetSecretValue and DescribeSecret 10,000;
 * CreateSecret 50.
 */
export const AWS_DOCUMENTED_QUOTAS: Readonly<Record<AwsQuotaGroup, number>> = {
  write: 50,
  tag: 50,
  read: 10_000,
  create: 50,
};

export const QUOTA_GROUP_OF: Readonly<Record<AwsAction, AwsQuotaGroup>> = {
  PutSecretValue: 'write',
  UpdateSecretVersionStage: 'write',
  TagResource: 'tag',
  GetSecretValue: 'read',
  DescribeSecret: 'read',
  // Counted with the reads; one per rotation (preflight's version count, preflight.ts).
  ListSecretVersionIds: 'read',
  CreateSecret: 'create',
  // AWS-native rotation's set-up calls (src/lambda/, `keyroll aws enable-rotation`): counted as writes.
  RotateSecret: 'write',
  CancelRotateSecret: 'write',
};

/** AWS's quota of versions per secret ("AWS Secrets Manager quotas"; not adjustable). */
export const AWS_VERSIONS_PER_SECRET = 100;

/**
 * Versions one rotation may add to its primary secret: the lock's own put before the roll, the
 * value's put after it, and room for two refreshes of the lock (each a put: a lease that ran short
 * before the roll, the refresh after the primary's write when the key has more destinations).
 */
export const VERSIONS_PER_ROTATION = 4;

/** The longest one call waits for its turn and out throttle answers before it fails (KR_BACKEND_THROTTLED). */
export const DEFAULT_QUOTA_WAIT_MS = 60_000;

export const AwsQuotas = z.strictObject({
  /** PutSecretValue, UpdateSecret and UpdateSecretVersionStage per second, for the account and region. */
  writesPerSecond: z.number().positive().default(AWS_DOCUMENTED_QUOTAS.write),
  /** TagResource and UntagResource per second (keyroll calls only TagResource). */
  tagsPerSecond: z.number().positive().default(AWS_DOCUMENTED_QUOTAS.tag),
  /** GetSecretValue and DescribeSecret per second. */
  readsPerSecond: z.number().positive().default(AWS_DOCUMENTED_QUOTAS.read),
  /** CreateSecret per second. */
  createsPerSecond: z.number().positive().default(AWS_DOCUMENTED_QUOTAS.create),
  /** `run --shard i/N` paces each shard at 1/N of every rate: the shards spend one account's budget. */
  shareAmongShards: z.boolean().default(true),
  /** The longest one call waits, for its turn and out throttle answers, before it fails. */
  maxWaitMs: z.number().int().positive().default(DEFAULT_QUOTA_WAIT_MS),
  /**
   * Versions one secret may hold that AWS will not remove: those created in the last 24 hours and
   * those carrying a staging label (AWS removes unlabeled versions past 100, never one younger
   * than 24 h). A rotation that would not fit is refused before its lock (KR_BACKEND_VERSION_QUOTA).
   */
  versionsPerSecret: z.number().int().positive().default(AWS_VERSIONS_PER_SECRET),
});
export type AwsQuotas = z.infer<typeof AwsQuotas>;

export function ratesOf(quotas: AwsQuotas): Record<AwsQuotaGroup, number> {
  return {
    write: quotas.writesPerSecond,
    tag: quotas.tagsPerSecond,
    read: quotas.readsPerSecond,
    create: quotas.createsPerSecond,
  };
}

/**
 * What one rotation of an existing secret spends of each quota (README.md, "Requests per
 * rotation", pinned by test/integration/aws-requests.test.ts), by the destination's role.
 * The primary: the lock's compare-and-swap on the secret itself (2: it also proves the fenced
 * write's two calls there, so preflight probes neither) and the fenced write (2); the intent marker
 * and the finish record (2 tags; the lock is given back with the record). A further destination:
 * the same lock and fenced write, its TagResource probe and its record. A fallback is preflighted
 * on every rotation: its two write probes and its TagResource probe.
 */
export const CALLS_PER_ROTATION: Readonly<
  Record<'primary' | 'destination' | 'fallback', Readonly<Record<'write' | 'tag', number>>>
> = {
  primary: { write: 4, tag: 2 },
  destination: { write: 4, tag: 2 },
  fallback: { write: 2, tag: 1 },
};

/**
 * What one rotation spends of the account's write and tag quotas in this backend's region (and
 * endpoint), where the backend is `role` for the key: CALLS_PER_ROTATION, the counts this folder's
 * request-saving choices leave, at a shard's share of each quota when the backend shares them
 * among `shards`. The region of a backend without one is `env`'s AWS_REGION, as the SDK would find it.
 */
export function awsRotationSpend(
  config: AwsBackendConfig,
  role: RotationRole,
  options: { shards?: number; env?: NodeJS.ProcessEnv },
): RotationSpend[] {
  const quotas = config.quotas ?? AwsQuotas.parse({});
  const share = quotas.shareAmongShards ? Math.max(1, options.shards ?? 1) : 1;
  const region =
    config.region ?? options.env?.AWS_REGION ?? options.env?.AWS_DEFAULT_REGION ?? 'default-region';
  const rates = ratesOf(quotas);
  return (['write', 'tag'] as const).map((group) => ({
    budget: `aws ${config.endpoint ?? 'aws'} ${region} ${group}`,
    calls: CALLS_PER_ROTATION[role][group],
    ratePerSecond: rates[group] / share,
  }));
}
