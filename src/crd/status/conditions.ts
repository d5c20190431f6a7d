// Conditions in the Kubernetes convention (metav1.Condition, as apimachinery's
// meta.SetStatusCondition keeps them): one entry per type; lastTransitionTime moves only when the
// type's status flips, so a status recomputed with the same facts is equal to the stored one and
// is not written again (docs/crds.md, "Watch and status"). Pure: the caller gives the clock.

export type ConditionStatus = 'True' | 'False' | 'Unknown';

/** A condition as stored on the object. */
export interface Condition {
  type: string;
  status: ConditionStatus;
  /** CamelCase, machine-readable: why the status is what it is. */
  reason: string;
  /** For people; never a secret (the writer takes typed facts only). */
  message: string;
  /** RFC 3339, seconds: when `status` last changed. */
  lastTransitionTime: string;
  /** The object's metadata.generation the condition was computed from. */
  observedGeneration?: number;
}

/** What the controller wants a condition to say now; the merge adds the times. */
export interface DesiredCondition {
  type: string;
  status: ConditionStatus;
  reason: string;
  message: string;
}

/** metav1.Condition's rule for `reason`: CamelCase letters, digits, `_`, `,` and `:`. */
const REASON = /^[A-Za-z](?:[A-Za-z0-9_,:]*[A-Za-z0-9_])?$/;
/** metav1.Condition's cap on `message`. */
export const MESSAGE_MAX = 32_768;

/** metav1.Time's form: RFC 3339 in UTC, whole seconds (the API server drops fractions). */
export function conditionTime(now: Date): string {
  return now.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * The stored conditions with `desired` merged in: a desired type that exists keeps its
 * lastTransitionTime unless its status flips, and takes the reason, message and
 * `observedGeneration`; a new type starts at `now`. Stored types not in `desired` stay as they are
 * (another writer's, or one the caller does not decide this time), in their order; new ones follow.
 * Throws RangeError for a reason the API server would refuse (a programming error, not input).
 */
export function mergeConditions(
  stored: readonly Condition[] | undefined,
  desired: readonly DesiredCondition[],
  observedGeneration: number,
  now: Date,
): Condition[] {
  const merged = (stored ?? []).map((condition) => ({ ...condition }));
  for (const want of desired) {
    if (!REASON.test(want.reason)) throw new RangeError(`condition ${want.type}: reason is not CamelCase`);
    const index = merged.findIndex((condition) => condition.type === want.type);
    const before = index >= 0 ? merged[index] : undefined;
    const condition: Condition = {
      type: want.type,
      status: want.status,
      reason: want.reason,
      message: want.message.slice(0, MESSAGE_MAX),
      lastTransitionTime:
        before !== undefined && before.status === want.status
          ? before.lastTransitionTime
          : conditionTime(now),
      observedGeneration,
    };
    if (index >= 0) merged[index] = condition;
    else merged.push(condition);
  }
  return merged;
}

/** The condition of `type`, when there is one. */
export function findCondition(
  conditions: readonly Condition[] | undefined,
  type: string,
): Condition | undefined {
  return conditions?.find((condition) => condition.type === type);
}
