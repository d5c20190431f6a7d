// Readiness: the daemon answers 200 on /readyz only once its policy is loaded and every
// destination of every key has passed the backend's preflight (credentials work, the path is
// writable) at least once. A daemon that cannot write its destinations would fail every
// rotation's own preflight (invariant 1); saying so at /readyz shows it before the first tick.
import type { AuditLog } from '../audit/events.ts';
import { sanitizeValue } from '../audit/sanitize.ts';
import { errorCode, errorMessage } from '../errors.ts';
import type { KeyPolicy, Policy } from '../policy/schema.ts';
import { mapWithConcurrency } from '../rotation/concurrency.ts';
import type { Runtime } from '../rotation/runtime.ts';

export interface PreflightFailure {
  backend: string;
  path: string;
  errorCode: string;
  error: string;
}

export type Readiness =
  | { state: 'starting' }
  | { state: 'ready'; checkedAt: string; destinations: number }
  | { state: 'preflight-failed'; checkedAt: string; destinations: number; failures: PreflightFailure[] }
  | { state: 'shutting-down' };

/** Preflights every distinct destination (fallbacks are a safety net, not a readiness condition). */
export async function preflightDestinations(runtime: Runtime, keys: readonly KeyPolicy[], audit: AuditLog, now: Date, concurrency: number): Promise<Readiness> {
  const seen = new Set<string>();
  const destinations = keys.flatMap((key) => runtime.resolveKey(key).destinations).filter((destination) => {
    const id = `${destination.backendName}\u0000${destination.target.path}`;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
  const results = await mapWithConcurrency(destinations, concurrency, async (destination): Promise<PreflightFailure | undefined> => {
    try {
      await destination.backend.preflight(destination.target);
      return undefined;
    } catch (error) {
      const failure = { backend: destination.backendName, path: destination.target.path, errorCode: errorCode(error), error: errorMessage(error) };
      audit.emit('daemon.preflight.failed', failure);
      return failure;
    }
  });
  const failures = results.filter((result): result is PreflightFailure => result !== undefined);
  const checkedAt = now.toISOString();
  return failures.length === 0
    ? { state: 'ready', checkedAt, destinations: destinations.length }
    : { state: 'preflight-failed', checkedAt, destinations: destinations.length, failures };
}

/** The /readyz answer: 200 only when ready; otherwise 503 with a status and a plain reason. */
export function readinessAnswer(readiness: Readiness, policy: Policy): { ready: boolean; body: unknown } {
  switch (readiness.state) {
    case 'ready':
      return { ready: true, body: { status: 'ready', policy: policy.file, keys: policy.keys.length, destinations: readiness.destinations, checkedAt: readiness.checkedAt } };
    case 'starting':
      return { ready: false, body: { status: 'starting', reason: 'the destinations have not passed preflight yet' } };
    case 'shutting-down':
      return { ready: false, body: { status: 'shutting-down', reason: 'shutdown in progress: in-flight rotations are finishing' } };
    case 'preflight-failed':
      // Backend messages name paths and codes, not values; the sanitizer still runs, as for any output.
      return {
        ready: false,
        body: sanitizeValue({
          status: 'preflight-failed',
          reason: `${readiness.failures.length} of ${readiness.destinations} destinations failed preflight`,
          checkedAt: readiness.checkedAt,
          failures: readiness.failures,
        }),
      };
  }
}
