// Invariant 2 under request quotas (invariant 11): the budget of every request between the roll
// answer and the last destination's write is taken before the roll, so after the roll answer
// each of them is sent at once instead of waiting for its turn behind other keys in the account's
// quota. That is each destination's write (a fenced write, put and stage move, for every
// destination whose lock the rotation holds) and, for a key with more than one destination, the
// locks' refresh after the primary's write (store.ts, `afterPrimary`).
// Each reservation is spent only by the requests it was taken for: they run inside its `use`. The
// key lock lives on the secret the write goes to, so a refresh of that lock before the roll (the
// lease ran short, or a background refresh during a 429 backoff) is a write to the same secret;
// were it to spend the write's turn, the rolled secret would wait in the account's queue and could
// be lost (issue 27).
// Destinations only: a fallback is the failure path, and reserving for it on every rotation would
// halve what an emergency gets through.
import type { WriteReservation } from '../backends/public/types.ts';
import type { KeptLock } from './lock-keeper.ts';
import type { ResolvedDestination } from './types.ts';

/** The budget of the store, taken before the roll. */
export interface WriteBudget {
  /** Runs the write of `destination` on the budget taken for it. */
  write<T>(destination: ResolvedDestination, calls: () => Promise<T>): Promise<T>;
  /** Runs the locks' refresh after the primary's write on the budget taken for it. */
  refresh<T>(calls: () => Promise<T>): Promise<T>;
  /** Gives back what was not spent; safe to call more than once. */
  release(): void;
}

function useAll<T>(reservations: readonly WriteReservation[], calls: () => Promise<T>): Promise<T> {
  return reservations.reduceRight<() => Promise<T>>(
    (inner, reservation) => () => reservation.use(inner),
    calls,
  )();
}

/**
 * Reserves the store's budget. `locks`: the locks the rotation holds (each destination's write is
 * fenced by its own, so it is a fenced write). Anything taken is given back when a later
 * reservation fails (KR_BACKEND_THROTTLED: nothing is rolled).
 */
export async function reserveWriteBudget(
  destinations: readonly ResolvedDestination[],
  locks: readonly KeptLock[],
): Promise<WriteBudget> {
  const writes = new Map<ResolvedDestination, WriteReservation>();
  const refresh: WriteReservation[] = [];
  const release = (): void => {
    for (const reservation of [...writes.values(), ...refresh]) reservation.release();
  };
  try {
    for (const destination of destinations) {
      const fenced = locks.some((kept) => kept.destination === destination);
      const reservation = await destination.backend.reserveWrite?.(destination.target, { fenced });
      if (reservation) writes.set(destination, reservation);
    }
    // The locks are refreshed after the primary's write only when another destination follows.
    if (destinations.length > 1) {
      for (const kept of locks) {
        const reservation = await kept.destination.backend.reserveLockRefresh?.(
          kept.destination.target,
          kept.lock,
        );
        if (reservation) refresh.push(reservation);
      }
    }
  } catch (error) {
    release();
    throw error;
  }
  return {
    write: (destination, calls) => {
      const reservation = writes.get(destination);
      return reservation === undefined ? calls() : reservation.use(calls);
    },
    refresh: (calls) => useAll(refresh, calls),
    release,
  };
}

export function releaseBudget(budget: WriteBudget | undefined): void {
  budget?.release();
}
