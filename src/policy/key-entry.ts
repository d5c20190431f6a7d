// Finding the policy entry an operator means. `rotate --key X` (and a leak report) may name a
// single key, a slot entry by its id, or one API key of a slot entry: the responder holds a key
// id from the dashboard, not the entry's name. The load-time checks (src/policy/slots.ts) make
// the answer unique: no id names two entries, no API key belongs to two.
import type { KeyPolicy, Policy } from './schema.ts';

export interface KeyEntryMatch {
  key: KeyPolicy;
  /** Set when `idOrSlot` named one slot of a slot entry (not the entry itself). */
  slot?: string;
}

/** The entry `idOrSlot` names (its id, or one of its slots), or undefined when none does. */
export function findKeyEntry(policy: Policy, idOrSlot: string): KeyEntryMatch | undefined {
  const byId = policy.keys.find((key) => key.id === idOrSlot);
  if (byId !== undefined) return { key: byId };
  const bySlot = policy.keys.find((key) => key.slots?.includes(idOrSlot) === true);
  return bySlot === undefined ? undefined : { key: bySlot, slot: idOrSlot };
}
