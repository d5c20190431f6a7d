// A deleted RotatedKey stops being rotated even when the generation that leaves it out cannot be
// built or prepared (issue 31, docs/crds.md "The daemon in objects mode"). A failed build keeps
// the generation in force, as a bad policy file does; kept whole, it would go on rotating the key
// of an object its owner deleted, for as long as some other object, a store or the settings keep
// every new build failing, and overwrite the secret the deletion was to leave as it is. So the
// generation in force is narrowed instead: the same policy without the deleted keys, on the same
// runtime (nothing is opened again, so nothing that made the build fail can fail it). Deletion
// takes nothing that was not there: the other keys, stores and schedules stay as they were.
import type { Policy } from '../policy/public/schema.ts';
import type { Runtime } from '../rotation/public/runtime.ts';
import { Generation } from '../scheduler/public/generation.ts';

/** `policy` without the key entries `keyIds` names. */
export function policyWithout(policy: Policy, keyIds: ReadonlySet<string>): Policy {
  return { ...policy, keys: policy.keys.filter((key) => !keyIds.has(key.id)) };
}

/**
 * A generation of `policy` on the runtime and consumers' refresher of `inForce`. The runtime is
 * still `inForce`'s: retiring the narrowed generation retires `inForce`, which closes it once the
 * runs of both are over (a run started on `inForce` before the swap finishes its store on it).
 * The caller stops `inForce`'s jobs and never retires it itself.
 */
export function narrowedGeneration(
  inForce: Generation,
  policy: Policy,
  onCloseError: (error: unknown) => void,
): Generation {
  const runtime: Runtime = { ...inForce.runtime, close: () => inForce.retire() };
  return new Generation(policy, runtime, onCloseError, inForce.refresher);
}
