// Which keys an on-demand command acts on. Explicitly named keys keep the order given (the
// responder lists the leaked key first); --org and --all keep policy order, grouped by
// organization so one tenant's keys finish together.
import { findKeyEntry } from '../policy/public/key-entry.ts';
import type { KeyPolicy, Policy } from '../policy/public/schema.ts';
import { UsageError } from '../errors.ts';

export interface KeySelection {
  keys?: string[];
  org?: string;
  all?: boolean;
}

export function selectKeys(policy: Policy, selection: KeySelection): KeyPolicy[] {
  const named = selection.keys ?? [];
  if (named.length === 0 && !selection.org && !selection.all) {
    throw new UsageError('say which keys: --key ID (repeatable), --org ID or --all');
  }
  if (selection.all && (named.length > 0 || selection.org)) {
    throw new UsageError('--all cannot be combined with --key or --org');
  }
  if (selection.all) return groupByOrganization(policy.keys);
  const unknown = named.filter((id) => findKeyEntry(policy, id) === undefined);
  if (unknown.length > 0) {
    throw new UsageError(
      `${policy.file}: no key ${unknown.map((id) => JSON.stringify(id)).join(', ')} in the policy`,
    );
  }
  const chosen: KeyPolicy[] = [];
  for (const id of named) {
    const entry = findKeyEntry(policy, id)?.key;
    if (entry && !chosen.includes(entry)) chosen.push(entry);
  }
  if (selection.org) {
    const ofOrg = policy.keys.filter((key) => key.organizationId === selection.org);
    if (ofOrg.length === 0)
      throw new UsageError(
        `${policy.file}: no key of organization ${JSON.stringify(selection.org)} in the policy`,
      );
    for (const key of ofOrg) if (!chosen.includes(key)) chosen.push(key);
  }
  return chosen;
}

/**
 * Slots named by `--key` (a two-slot entry's API key id, as a leak report or the dashboard gives
 * it): entry id → the slot to roll. Naming the entry itself rolls its active slot on a leak.
 */
export function namedSlots(policy: Policy, named: readonly string[]): Map<string, string> {
  const slots = new Map<string, string>();
  for (const id of named) {
    const match = findKeyEntry(policy, id);
    if (match?.slot === undefined) continue;
    const earlier = slots.get(match.key.id);
    if (earlier !== undefined && earlier !== match.slot) {
      throw new UsageError(
        `--key ${JSON.stringify(earlier)} and --key ${JSON.stringify(match.slot)} are both slots of ${JSON.stringify(match.key.id)}: rotate one slot at a time`,
      );
    }
    slots.set(match.key.id, match.slot);
  }
  return slots;
}

function groupByOrganization(keys: readonly KeyPolicy[]): KeyPolicy[] {
  const order = [...new Set(keys.map((key) => key.organizationId))];
  return order.flatMap((org) => keys.filter((key) => key.organizationId === org));
}
