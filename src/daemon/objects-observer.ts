// What a daemon whose keys come from keyroll.io objects tells the component that writes the
// objects' status and Events (src/crd/controller/, issue 31): which RotatedKey is which key of the
// generation in force and which objects were refused, how each key's rotation ended, and whether
// this replica leads (only the Lease holder writes status). The daemon calls it; it never waits
// for it and a throw is reported (daemon.failed, what: objects-observer), never fatal: a status
// writer's bug must not stop a rotation. The shapes are plain types of crd/ and rotation/, so the
// controller (which may not import src/daemon/, a floor above it) implements it structurally.
import type { AuditLog } from '../audit/public/events.ts';
import type { DeliveryReport } from '../consumers/public/types.ts';
import type { Refusal } from '../crd/public/policy/refusal.ts';
import type { WatchChange } from '../crd/public/watch/reflector.ts';
import type { KeyOutcome, RunTrigger } from '../rotation/public/types.ts';
import { reportFailure } from './prepare.ts';

export interface ObjectsObserver {
  /**
   * A generation built from the objects is in force (at start, after every change that swapped
   * one in, and when only the refusals changed). `keys`: RotatedKey `namespace/name` → the key
   * entry's id; a RotatedKey absent from it and from `refusals` was deleted, or is not this
   * keyroll's. `refusals`: every object left out, with its reason (docs/crds.md "Tenancy").
   */
  onGeneration(keys: ReadonlyMap<string, string>, refusals: readonly Refusal[]): void;
  /** A key's rotation (or drift probe) ended, on any path: schedule, sweep, trigger, leak intake. */
  onKeyOutcome(keyId: string, outcome: KeyOutcome, trigger: RunTrigger): void;
  /** This replica started (true) or stopped (false) leading; true once at start without a Lease. */
  onLeadership(leading: boolean): void;
  /** A RotatedKey changed as the watch saw it (its annotations and status too, which build nothing). */
  onObjectChange?(change: WatchChange): void;
  /** A run's consumer delivery ended: its counts for one key it refreshed consumers of. */
  onConsumers?(keyId: string, report: KeyConsumersReport): void;
}

/** One delivery's counts for one key. */
export interface KeyConsumersReport {
  refreshed: number;
  failed: number;
  deferred: number;
  skipped: number;
}

/** A delivery's outcomes counted per key (a consumer of two keys counts for both). */
export function consumersByKey(report: DeliveryReport): Map<string, KeyConsumersReport> {
  const byKey = new Map<string, KeyConsumersReport>();
  for (const outcome of report.outcomes)
    for (const keyId of outcome.keyIds) {
      const counts = byKey.get(keyId) ?? { refreshed: 0, failed: 0, deferred: 0, skipped: 0 };
      counts[outcome.result] += 1;
      byKey.set(keyId, counts);
    }
  return byKey;
}

/** Calls the observer, reporting a throw instead of passing it on. */
export function tellObserver(audit: AuditLog, tell: () => void): void {
  try {
    tell();
  } catch (error) {
    reportFailure(audit, 'objects-observer', error);
  }
}

/** What the daemon tells, each call guarded by tellObserver; without an observer, nothing. */
export interface ObserverCalls {
  keyOutcome(outcome: KeyOutcome, trigger: RunTrigger): void;
  leadership(leading: boolean): void;
  /** A run's consumer delivery ended (undefined: it had nothing to deliver). */
  consumers(report: DeliveryReport | undefined): void;
}

export function observerCalls(audit: AuditLog, observer: ObjectsObserver | undefined): ObserverCalls {
  return {
    keyOutcome: (outcome, trigger) => {
      if (observer !== undefined)
        tellObserver(audit, () => {
          observer.onKeyOutcome(outcome.keyId, outcome, trigger);
        });
    },
    leadership: (leading) => {
      if (observer !== undefined)
        tellObserver(audit, () => {
          observer.onLeadership(leading);
        });
    },
    consumers: (report) => {
      const onConsumers = observer?.onConsumers?.bind(observer);
      if (onConsumers === undefined || report === undefined) return;
      tellObserver(audit, () => {
        for (const [keyId, counts] of consumersByKey(report)) onConsumers(keyId, counts);
      });
    },
  };
}
