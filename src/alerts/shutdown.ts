// SIGTERM is honoured whatever an alert sink does (issue 12, section 2): once shutdown begins,
// every alert or notification delivery, the one in flight and any that starts later, has at most
// a short window left. A healthy sink answers well within it (the run's own "aborted" warning
// still goes out); a sink that hangs or drips is abandoned at the window's end and the delivery
// is audited as undelivered (KR_ALERT_ABORTED). Kubernetes sends SIGKILL 30 s after SIGTERM by
// default; the window keeps alerting a small, known part of that.
//
// The CLI ties deliveries to its shutdown signal here, process-wide, because the alerter and the
// notifier are built by the runtime, far from the signal handler; an alerter may also be given a
// signal of its own (AlerterOptions.signal).

/** How long a delivery may go on after shutdown began (docs/exit-codes.md). */
export const SHUTDOWN_WINDOW_MS = 5_000;

const processSignals = new Set<AbortSignal>();

/** Ties every delivery of this process to `signal` (the CLI's SIGTERM/SIGINT) until the returned function runs. */
export function abandonDeliveriesOn(signal: AbortSignal): () => void {
  processSignals.add(signal);
  return () => {
    processSignals.delete(signal);
  };
}

/** Why a delivery was abandoned: the message is fixed, the audit event names the sink. */
export class DeliveryAbandoned extends Error {
  override name = 'DeliveryAbandoned';
  constructor(windowMs: number) {
    super(`shutdown: the delivery was abandoned ${String(windowMs)} ms after the signal`);
  }
}

export interface DeliveryCutoff {
  /** Aborts (with a DeliveryAbandoned) `windowMs` after shutdown began, or after now if it already had. */
  readonly signal: AbortSignal;
  /** Stops watching; call when the delivery is over. */
  dispose(): void;
}

/** The cutoff of one delivery: `own` (the alerter's signal) and every process-wide shutdown signal. */
export function deliveryCutoff(
  own: AbortSignal | undefined,
  windowMs: number = SHUTDOWN_WINDOW_MS,
): DeliveryCutoff {
  const controller = new AbortController();
  const watched = [...processSignals, ...(own === undefined ? [] : [own])];
  let timer: NodeJS.Timeout | undefined;
  const begin = (): void => {
    if (timer !== undefined || controller.signal.aborted) return;
    timer = setTimeout(() => {
      controller.abort(new DeliveryAbandoned(windowMs));
    }, windowMs);
  };
  for (const signal of watched) {
    if (signal.aborted) begin();
    else signal.addEventListener('abort', begin, { once: true });
  }
  return {
    signal: controller.signal,
    dispose: () => {
      clearTimeout(timer);
      for (const signal of watched) signal.removeEventListener('abort', begin);
    },
  };
}

/** Waits `wait` unless `cutoff` aborts first; true when the wait ran to its end. */
export async function waitUnlessCutOff(wait: Promise<void>, cutoff: AbortSignal): Promise<boolean> {
  if (cutoff.aborted) return false;
  let onAbort: (() => void) | undefined;
  try {
    return await Promise.race([
      wait.then(() => true),
      new Promise<false>((resolve) => {
        onAbort = () => {
          resolve(false);
        };
        cutoff.addEventListener('abort', onAbort, { once: true });
      }),
    ]);
  } finally {
    if (onAbort !== undefined) cutoff.removeEventListener('abort', onAbort);
  }
}
