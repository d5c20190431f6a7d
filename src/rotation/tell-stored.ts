// Right after the store of a single key (invariant 12): the roll killed the value its consumers
// hold, and the value just stored is the only one that works, verified or not. Its consumers are
// told now (deps.onStored: a webhook notice, fired and not awaited) instead of after verify and
// finish, which under load end tens of milliseconds later while every consumer call fails. A
// two-slot entry's previous value stays alive (invariant 10), so its notice waits for the end.
// Nothing here runs between the roll answer and the write (invariant 2): the store is done.
import type { StoreReport } from './store.ts';
import type { Stored } from './step-roll.ts';
import type { Transaction } from './transaction.ts';
import type { KeyOutcome } from './types.ts';

/** Where each copy was stored and at which version (what a notice and the outcome carry). */
export function storedVersions(report: StoreReport): NonNullable<KeyOutcome['versions']> {
  return report.stored.map((copy) => ({
    backend: copy.destination.backendName,
    path: copy.destination.target.path,
    version: copy.version,
  }));
}

/** Tells deps.onStored of a single key's stored value. Never throws, never waits. */
export function tellStored(tx: Transaction, stored: Stored): void {
  const { key, deps, progress } = tx;
  if (deps.onStored === undefined || key.slots !== undefined) return;
  const { rotatedAt, exposureMs, report } = stored;
  try {
    deps.onStored(
      tx.outcome(
        { result: progress.recovering ? 'recovered' : 'rotated' },
        {
          rotatedAt,
          reason: tx.trigger.reason,
          versions: storedVersions(report),
          ...(exposureMs === undefined ? {} : { exposureMs }),
        },
      ),
    );
  } catch {
    // A listener's fault never touches a stored rotation; the notice at the end goes out as before.
  }
}
