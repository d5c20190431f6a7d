// The schedule Secrets Manager rotates an aws-native key on, derived from its policy: the key's
// maxAge, in whole days (RotationRules.AutomaticallyAfterDays, what AWS Config's
// secretsmanager-secret-periodic-rotation compares against), else in whole hours as
// `rate(N hours)` (AWS's minimum is 4 hours). A croner schedule is not translated: AWS reads its
// own cron dialect in UTC only, and a silently different schedule would be worse than a refusal.
import { formatDuration } from '../policy/public/duration.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import type { RotationRules } from '../backends/public/native.ts';
import { NativeRotationError } from './errors.ts';

const HOUR_MS = 3600_000;
const DAY_MS = 24 * HOUR_MS;
/** AWS refuses a rotation window shorter than this. */
export const AWS_MIN_ROTATION_INTERVAL_MS = 4 * HOUR_MS;
const AWS_MAX_DAYS = 1000;

export function rotationRulesFor(key: KeyPolicy): RotationRules {
  const maxAgeMs = key.maxAgeMs;
  if (maxAgeMs === undefined) {
    throw new NativeRotationError(
      'KR_NATIVE_NOT_CONFIGURED',
      `key ${key.id} has no maxAge: Secrets Manager's schedule is derived from maxAge (a cron schedule is not translated to AWS's UTC cron dialect); set maxAge on the key`,
    );
  }
  const floor = Math.max(AWS_MIN_ROTATION_INTERVAL_MS, key.minIntervalMs, key.consumerRefreshMs ?? 0);
  if (maxAgeMs < floor) {
    throw new NativeRotationError(
      'KR_NATIVE_NOT_CONFIGURED',
      `key ${key.id}: maxAge ${formatDuration(maxAgeMs)} is shorter than ${formatDuration(floor)} (the larger of AWS's 4h minimum, minInterval and consumerRefresh); raise maxAge`,
    );
  }
  if (maxAgeMs % DAY_MS === 0 && maxAgeMs / DAY_MS <= AWS_MAX_DAYS)
    return { AutomaticallyAfterDays: maxAgeMs / DAY_MS };
  // Rounded down: AWS rotates no later than the policy's maxAge.
  return { ScheduleExpression: `rate(${String(Math.floor(maxAgeMs / HOUR_MS))} hours)` };
}
