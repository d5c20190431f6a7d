// Reads what `plan` and `status` show for each key, without changing anything: the primary
// destination's bookkeeping, the due decision and, for a two-slot entry, which slot is active.
import { errorCode, errorMessage } from '../errors.ts';
import { decideDue, type DueDecision } from '../policy/public/due.ts';
import { primaryDestination, type KeyPolicy, type Policy } from '../policy/public/schema.ts';
import { createBackend } from '../backends/public/registry.ts';
import type { Backend, KeyState } from '../backends/public/types.ts';
import { activeSlot, standbySlot } from '../rotation/public/slots.ts';
import { readTrustedState } from '../rotation/public/trusted-state.ts';

export interface KeyView {
  key: KeyPolicy;
  state?: KeyState;
  decision?: DueDecision;
  /** Set when the state could not be read (backend down, denied). */
  readError?: { errorCode: string; message: string };
}

export interface ReadOnlyBackends {
  get(name: string): Backend;
  close(): Promise<void>;
}

export async function openBackends(policy: Policy): Promise<ReadOnlyBackends> {
  const backends = new Map<string, Backend>();
  for (const [name, config] of Object.entries(policy.backends))
    backends.set(name, await createBackend(name, config, {}));
  return {
    get: (name) => {
      const backend = backends.get(name);
      if (!backend) throw new Error(`backend ${name} is not defined in the policy`);
      return backend;
    },
    close: async () => {
      for (const backend of backends.values()) await backend.close();
    },
  };
}

export async function viewKeys(
  policy: Policy,
  backends: ReadOnlyBackends,
  now: Date,
  keys: readonly KeyPolicy[] = policy.keys,
): Promise<KeyView[]> {
  const views: KeyView[] = [];
  for (const key of keys) {
    const primary = primaryDestination(key);
    try {
      const state = await readTrustedState(
        { backend: backends.get(primary.backend), target: primary.target },
        key,
        now,
      );
      const decision = decideDue(
        key,
        {
          ...(state.lastRotatedAt ? { lastRotatedAt: state.lastRotatedAt } : {}),
          ...(state.intent ? { intent: state.intent } : {}),
        },
        now,
      );
      views.push({ key, state, decision });
    } catch (error) {
      views.push({ key, readError: { errorCode: errorCode(error), message: errorMessage(error) } });
    }
  }
  return views;
}

/**
 * When the key is next due: now when it is due, else the earlier of its next schedule run and
 * the time its max age is reached. Undefined when neither applies (or the state is unreadable).
 */
export function nextDueAt(decision: DueDecision | undefined, now: Date): Date | undefined {
  if (decision === undefined) return undefined;
  if (decision.due) return now;
  const candidates = [decision.nextRunAt, decision.maxAgeAt].filter((d): d is Date => d !== undefined);
  return candidates.sort((a, b) => a.getTime() - b.getTime())[0];
}

/** A two-slot entry as `plan` and `status` show it (invariant 10). */
export interface SlotView {
  /** The entry's two API key ids, as the policy lists them. */
  ids: readonly [string, string];
  /** The slot whose secret is stored (consumers use it); null when the state cannot be read. */
  active: string | null;
  /** The slot the next scheduled rotation rolls; null when the state cannot be read. */
  standby: string | null;
  consumerRefreshMs: number | null;
  /**
   * ISO-8601: the last rotation + consumerRefresh. Until then a consumer may still hold the
   * standby's value (it was active before the last rotation), so no scheduled rotation rolls it.
   * Null when keyroll never rotated the entry (nothing holds the standby's value: free now).
   */
  standbyFreeAt: string | null;
  /** ISO-8601: when a scheduled rotation next rolls the standby: the later of the entry's next due time and standbyFreeAt. */
  standbyNextRollAt: string | null;
}

/** The slot view of a two-slot entry; undefined for a single key. */
export function slotView(view: KeyView, now: Date): SlotView | undefined {
  const { key, state } = view;
  if (key.slots === undefined) return undefined;
  const refresh = key.consumerRefreshMs ?? null;
  if (state === undefined)
    return {
      ids: key.slots,
      active: null,
      standby: null,
      consumerRefreshMs: refresh,
      standbyFreeAt: null,
      standbyNextRollAt: null,
    };
  const active = activeSlot(key.slots, state);
  const standby = standbySlot(key.slots, state);
  const last = state.lastRotatedAt === undefined ? Number.NaN : Date.parse(state.lastRotatedAt);
  const freeAt = Number.isNaN(last) || refresh === null ? undefined : new Date(last + refresh);
  const due = nextDueAt(view.decision, now);
  const nextRoll = due === undefined ? undefined : freeAt !== undefined && freeAt > due ? freeAt : due;
  return {
    ids: key.slots,
    active,
    standby,
    consumerRefreshMs: refresh,
    standbyFreeAt: freeAt?.toISOString() ?? null,
    standbyNextRollAt: nextRoll?.toISOString() ?? null,
  };
}
