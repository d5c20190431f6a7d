// Which keys an on-demand command acts on. Explicitly named keys keep the order given (the
// responder lists the leaked key first); --org and --all keep policy order, grouped by
// organization so one tenant's keys finish together.
import type { KeyPolicy, Policy } from '../policy/schema.ts';
import { UsageError } from './common.ts';

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
  const byId = new Map(policy.keys.map((key) => [key.id, key]));
  const unknown = named.filter((id) => !byId.has(id));
  if (unknown.length > 0) {
    throw new UsageError(`${policy.file}: no key ${unknown.map((id) => JSON.stringify(id)).join(', ')} in the policy`);
  }
  const chosen = named.map((id) => byId.get(id) as KeyPolicy);
  if (selection.org) {
    const ofOrg = policy.keys.filter((key) => key.organizationId === selection.org);
    if (ofOrg.length === 0) throw new UsageError(`${policy.file}: no key of organization ${JSON.stringify(selection.org)} in the policy`);
    for (const key of ofOrg) if (!chosen.includes(key)) chosen.push(key);
  }
  return chosen;
}

function groupByOrganization(keys: readonly KeyPolicy[]): KeyPolicy[] {
  const order = [...new Set(keys.map((key) => key.organizationId))];
  return order.flatMap((org) => keys.filter((key) => key.organizationId === org));
}
