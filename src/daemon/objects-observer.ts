// What a daemon whose keys come from keyroll.io objects tells the component that writes the
// objects' status and Events (src/crd/controller/, issue 31): which RotatedKey is which key of the
// generation in force and which objects were refused, how each key's rotation ended, and whether
// this replica leads (only the Lease holder writes status). The daemon calls it; it never waits
// for it and a throw is reported (daemon.failed, what: objects-observer), never fatal: a status
// writer's bug must not stop a rotation. The shapes are plain types of crd/ and rotation/, so the
// controller (which may not import src/daemon/, a floor above it) implements it structurally.
import type { AuditLog } from '../audit/public/events.ts';
import type { Refusal } from '../crd/public/policy/refusal.ts';
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
  };
}
