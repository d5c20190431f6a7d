// Which API key a rotation rolls (invariant 10). A single-key entry rolls its key. A two-slot
// entry serves its consumers from the *active* slot and rolls the *standby*: no consumer should
// hold the standby's secret any more, and the active one's stays alive for a full period, so a
// consumer that refreshes within `consumerRefresh` never meets a dead secret. The exceptions
// roll the active slot: a leak (that value must die), and a stored secret that is already dead
// (drift, or a crash that lost it), where rolling the dead slot breaks nobody who still works.
import type { KeyState } from '../backends/public/types.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { isLeakReason, type RunTrigger } from './types.ts';

export interface RollPlan {
  /** The API key this rotation rolls: the key itself, or one slot of a two-slot entry. */
  rollKeyId: string;
  /** Two-slot entries: the slot active before this rotation. */
  activeBefore?: string;
  /**
   * Two-slot entries that alternate: the previous active slot, whose secret must still work after
   * the new one is stored (consumers that have not refreshed yet use it).
   */
  keepsAlive?: string;
}

/**
 * The active slot: keyroll's own record (`lastKeyId`), else the first slot (an entry migrated from
 * a single key lists that key first).
 */
export function activeSlot(slots: readonly [string, string], state: Pick<KeyState, 'lastKeyId'>): string {
  return state.lastKeyId !== undefined && slots.includes(state.lastKeyId) ? state.lastKeyId : slots[0];
}

/** The slot the next scheduled rotation rolls: the one that is not active. */
export function standbySlot(slots: readonly [string, string], state: Pick<KeyState, 'lastKeyId'>): string {
  return slots[0] === activeSlot(slots, state) ? slots[1] : slots[0];
}

export interface PlanInput {
  key: KeyPolicy;
  state: Pick<KeyState, 'lastKeyId'>;
  trigger: RunTrigger;
  /** The slot a leak named (`rotate --key <slot>`). */
  namedSlot?: string | undefined;
  /** The stored secret is known dead (a recovery found it so): roll the dead slot. */
  storedDead?: boolean;
}

export function planRoll(input: PlanInput): RollPlan {
  const { key, trigger } = input;
  if (!key.slots) return { rollKeyId: key.id };
  const active = activeSlot(key.slots, input.state);
  const standby = standbySlot(key.slots, input.state);
  if (input.namedSlot !== undefined && key.slots.includes(input.namedSlot)) {
    return {
      rollKeyId: input.namedSlot,
      activeBefore: active,
      ...(input.namedSlot === standby ? { keepsAlive: active } : {}),
    };
  }
  if (isLeak(trigger) || input.storedDead === true || trigger.reason === 'drift')
    return { rollKeyId: active, activeBefore: active };
  return { rollKeyId: standby, activeBefore: active, keepsAlive: active };
}

export function isLeak(trigger: RunTrigger): boolean {
  return isLeakReason(trigger.reason);
}

/**
 * Invariant 10: the standby stopped being active at the last rotation; rolling it sooner than
 * `consumerRefresh` after that would kill a value consumers may still hold. Only a leak of it
 * (its value must die) goes ahead; `--force` does not.
 */
export function standbyStillInUse(
  key: KeyPolicy,
  plan: RollPlan,
  lastRotatedAt: string | undefined,
  now: Date,
  trigger: RunTrigger,
): boolean {
  if (!key.slots || key.consumerRefreshMs === undefined || plan.keepsAlive === undefined || isLeak(trigger))
    return false;
  if (lastRotatedAt === undefined) return false;
  return now.getTime() - Date.parse(lastRotatedAt) < key.consumerRefreshMs;
}
