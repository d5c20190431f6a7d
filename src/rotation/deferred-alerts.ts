// Alerts of one key's rotation, held until its lock is released. A sink that is slow, hangs or
// answers with a flood must never keep a key lock held: every other runner of that key would wait
// (or take the lock over) while the sink decides. The audit events of each step are still written
// at once; only the delivery to sinks waits for the rotation to let go. (The consumers' notices go
// out after the rotation too, src/consumers/, except a single key's webhook notice: fired, never
// awaited, right after its store, tell-stored.ts.)
import type { Alert } from '../alerts/public/types.ts';
import type { RotationDeps } from './types.ts';

export interface DeferredAlerts {
  /** The rotation's deps, whose alerter queues instead of sending. */
  deps: RotationDeps;
  /** Sends what was queued, in order (the alerter audits what it cannot deliver; it never throws). */
  flush(): Promise<void>;
}

export function deferAlerts(deps: RotationDeps): DeferredAlerts {
  const queue: { alert: Alert; sinks: readonly string[] | undefined }[] = [];
  const deferred: RotationDeps = {
    ...deps,
    alerter: {
      send: (alert, sinks) => {
        queue.push({ alert, sinks });
        return Promise.resolve();
      },
    },
  };
  return {
    deps: deferred,
    flush: async () => {
      for (const item of queue.splice(0)) await deps.alerter.send(item.alert, item.sinks);
    },
  };
}
