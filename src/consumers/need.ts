// When a stored value must reach its consumers (invariant 12; docs/policy.md, refreshConsumers).
// The roll of a single key kills the value its consumers hold, as does a leak rotation and the
// heal of a dead stored secret: those consumers are failing, so they are told at once and their
// workloads restart whatever the restart window says. A two-slot rotation of the standby leaves
// the value consumers hold alive (invariant 10): they pick the new one up within consumerRefresh,
// so nothing is restarted unless the policy asks for it (refreshConsumers: always), and then
// within the window.
import type { KeyPolicy } from '../policy/public/schema.ts';
import { isLeakReason, type KeyOutcome } from '../rotation/public/types.ts';
import type { Urgency } from './types.ts';

/** Undefined when the outcome stored no new value, or none its consumers need now. */
export function refreshUrgency(key: KeyPolicy, outcome: KeyOutcome): Urgency | undefined {
  if (outcome.rotatedAt === undefined || (outcome.result !== 'rotated' && outcome.result !== 'recovered'))
    return undefined;
  if (outcome.reason !== undefined && isLeakReason(outcome.reason)) return 'now';
  if (key.slots === undefined) return 'now';
  // The active slot was rolled (leak, drift, a lost value) or the previous one was found dead.
  if (outcome.previousActiveWorks !== true) return 'now';
  return key.refreshConsumers === 'always' ? 'window' : undefined;
}
