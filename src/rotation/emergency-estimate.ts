// How long an emergency over some keys takes at best (`keyroll plan`): every key rolled at once,
// as `rotate --all --reason leak` does, bounded by the API's rate (keyroll's own limiter,
// api.rateLimitPerMinute) and by each AWS account's request quotas per region (invariant 11: a
// quota is a budget). Each AWS destination's region (and endpoint) is one budget shared by every
// key that writes there, whatever the concurrency; the slowest budget bounds the whole run. Vault
// and file destinations have no quota keyroll knows of and bound nothing here.
import { rotationSpend, type RotationRole } from '../backends/public/rotation-spend.ts';
import type { KeyPolicy, Policy } from '../policy/public/schema.ts';

export interface EmergencyBound {
  /** `api`, or `aws <endpoint or "aws"> <region> <write|tag>`. */
  budget: string;
  /** Requests the selected keys' rotations make in this budget. */
  calls: number;
  ratePerSecond: number;
  seconds: number;
}

export interface EmergencyEstimate {
  keys: number;
  /** The slowest budget's seconds: no emergency over these keys ends sooner. */
  seconds: number;
  boundBy: EmergencyBound;
  bounds: EmergencyBound[];
}

/**
 * The estimate for `keys` (a run's selection: a shard's keys at a shard's share of each AWS quota
 * when the backend shares them among `shards`). The region of a backend without one is `env`'s
 * AWS_REGION, as the SDK would find it.
 */
export function estimateEmergency(
  policy: Policy,
  keys: readonly KeyPolicy[],
  options: { shards?: number; env?: NodeJS.ProcessEnv } = {},
): EmergencyEstimate {
  const apiRate = policy.api.rateLimitPerMinute / 60;
  const bounds = new Map<string, EmergencyBound>();
  bounds.set('api', {
    budget: 'api',
    calls: keys.length,
    ratePerSecond: apiRate,
    seconds: keys.length / apiRate,
  });
  // What a rotation spends, and where, is the backend's to say (backends/rotation-spend.ts).
  const spend = (backendName: string, role: RotationRole): void => {
    const backend = policy.backends[backendName];
    if (backend === undefined) return;
    for (const { budget, calls, ratePerSecond } of rotationSpend(backend, role, options)) {
      const bound = bounds.get(budget) ?? { budget, calls: 0, ratePerSecond, seconds: 0 };
      bound.calls += calls;
      bound.ratePerSecond = Math.min(bound.ratePerSecond, ratePerSecond);
      bound.seconds = bound.calls / bound.ratePerSecond;
      bounds.set(budget, bound);
    }
  };
  for (const key of keys) {
    key.destinations.forEach((destination, index) => {
      spend(destination.backend, index === 0 ? 'primary' : 'destination');
    });
    for (const fallback of key.fallbacks) spend(fallback.backend, 'fallback');
  }
  const all = [...bounds.values()].sort((a, b) => b.seconds - a.seconds);
  const boundBy = all[0] ?? { budget: 'api', calls: 0, ratePerSecond: apiRate, seconds: 0 };
  return { keys: keys.length, seconds: boundBy.seconds, boundBy, bounds: all };
}

/** `2m05s`, `41s`, `0.4s` (rounded up: an estimate of the least time). */
export function formatSeconds(seconds: number): string {
  if (seconds < 10) return `${(Math.ceil(seconds * 10) / 10).toString()}s`;
  const whole = Math.ceil(seconds);
  const minutes = Math.floor(whole / 60);
  const rest = whole % 60;
  return minutes === 0 ? `${String(rest)}s` : `${String(minutes)}m${String(rest).padStart(2, '0')}s`;
}

/** One line for `keyroll plan`: the wall time and what bounds it. */
export function describeEmergency(estimate: EmergencyEstimate): string {
  const { boundBy } = estimate;
  const api = estimate.bounds.find((bound) => bound.budget === 'api');
  const what =
    boundBy.budget === 'api'
      ? `the API rate keyroll paces itself at (api.rateLimitPerMinute: ${String(Math.round(boundBy.ratePerSecond * 60))}/min)`
      : `the AWS ${boundBy.budget.split(' ')[3] ?? ''} quota of ${boundBy.budget.split(' ').slice(1, 3).join(' ')} (${String(boundBy.calls)} calls at ${String(Math.round(boundBy.ratePerSecond * 100) / 100)}/s)`;
  const apiNote =
    boundBy.budget !== 'api' && api !== undefined
      ? `; the API alone would allow it in ${formatSeconds(api.seconds)}`
      : '';
  const advice =
    boundBy.budget === 'api'
      ? ''
      : ': faster only with fewer keys per account and region (spread destinations over regions or accounts), not with more --concurrency or shards';
  return `an emergency over these ${String(estimate.keys)} keys (rotate --reason leak) takes at least ${formatSeconds(estimate.seconds)}, bound by ${what}${apiNote}${advice}`;
}
