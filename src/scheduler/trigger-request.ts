// The body of POST /v1/rotations: which keys and why. Our own API, so parsing is strict (an
// unknown field is refused rather than silently ignored: a misspelt `keys` must not turn into
// "no keys"). Key selection mirrors `keyroll rotate --key/--org/--all`. Who asks is the caller
// whose key signed the request; `actor` may repeat that name and is refused when it differs.
import { z } from 'zod';
import type { KeyPolicy } from '../policy/public/schema.ts';

export const TriggerRequest = z
  .strictObject({
    keys: z.array(z.string().min(1).max(256)).min(1).max(1000).optional(),
    org: z.string().min(1).max(256).optional(),
    all: z.literal(true).optional(),
    reason: z.enum(['leak', 'compromise', 'plan-change', 'manual']),
    actor: z.string().trim().min(1).max(200).optional(),
    ticket: z.string().trim().min(1).max(200).optional(),
  })
  .refine(
    (body) =>
      [body.keys !== undefined, body.org !== undefined, body.all === true].filter(Boolean).length === 1,
    {
      error: 'name exactly one of keys, org or all',
    },
  );
export type TriggerRequest = z.infer<typeof TriggerRequest>;

/** `slots`: two-slot entries named by one of their slots (the slot a leak names): entry id → slot. */
export type KeySelection =
  | { ok: true; keys: KeyPolicy[]; slots?: Map<string, string> }
  | { ok: false; why: 'unknown-keys' | 'unknown-org'; message: string; unknown: string[] };

/** The policy keys a request names: named keys in the order given (the leaked one first), else policy order. */
export function selectTriggerKeys(policyKeys: readonly KeyPolicy[], request: TriggerRequest): KeySelection {
  if (request.all === true) return { ok: true, keys: [...policyKeys] };
  if (request.org !== undefined) {
    const keys = policyKeys.filter((key) => key.organizationId === request.org);
    return keys.length > 0
      ? { ok: true, keys }
      : {
          ok: false,
          why: 'unknown-org',
          message: 'no key of this organization is in the policy',
          unknown: [request.org],
        };
  }
  // An entry id, or one slot of a two-slot entry (as `keyroll rotate --key` takes them).
  const entryFor = (id: string): { key: KeyPolicy; slot?: string } | undefined => {
    const byId = policyKeys.find((key) => key.id === id);
    if (byId) return { key: byId };
    const bySlot = policyKeys.find((key) => key.slots?.includes(id) === true);
    return bySlot ? { key: bySlot, slot: id } : undefined;
  };
  const named = [...new Set(request.keys ?? [])];
  const unknown = named.filter((id) => entryFor(id) === undefined);
  if (unknown.length > 0)
    return { ok: false, why: 'unknown-keys', message: 'these keys are not in the policy', unknown };
  const keys: KeyPolicy[] = [];
  const slots = new Map<string, string>();
  for (const id of named) {
    const match = entryFor(id);
    if (!match) continue;
    if (!keys.includes(match.key)) keys.push(match.key);
    if (match.slot !== undefined) slots.set(match.key.id, match.slot);
  }
  return { ok: true, keys, ...(slots.size > 0 ? { slots } : {}) };
}
