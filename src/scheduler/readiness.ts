// Readiness: the daemon answers 200 on /readyz only once its policy is loaded and every
// destination of every key has passed the backend's preflight (credentials work, the path is
// writable) at least once. A daemon that cannot write its destinations would fail every
// rotation's own preflight (invariant 1); saying so at /readyz shows it before the first tick.
import type { AuditLog } from '../audit/public/events.ts';
import { errorCode, errorMessage } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { mapWithConcurrency } from '../rotation/public/concurrency.ts';
import type { Runtime } from '../rotation/public/runtime.ts';

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

/** What a readiness check answers. */
export type CheckedReadiness = Extract<Readiness, { state: 'ready' | 'preflight-failed' }>;

/** Preflights every distinct destination (fallbacks are a safety net, not a readiness condition). */
export async function preflightDestinations(
  runtime: Runtime,
  keys: readonly KeyPolicy[],
  audit: AuditLog,
  now: Date,
  concurrency: number,
): Promise<CheckedReadiness> {
  const seen = new Set<string>();
  const destinations = keys
    .flatMap((key) => runtime.resolveKey(key).destinations)
    .filter((destination) => {
      const id = `${destination.backendName}\u0000${destination.target.path}`;
      if (seen.has(id)) return false;
      seen.add(id);
      return true;
    });
  const results = await mapWithConcurrency(
    destinations,
    concurrency,
    async (destination): Promise<PreflightFailure | undefined> => {
      try {
        await destination.backend.preflight(destination.target);
        return undefined;
      } catch (error) {
        const failure = {
          backend: destination.backendName,
          path: destination.target.path,
          errorCode: errorCode(error),
          error: errorMessage(error),
        };
        audit.emit('daemon.preflight.failed', failure);
        return failure;
      }
    },
  );
  const failures = results.filter((result): result is PreflightFailure => result !== undefined);
  const checkedAt = now.toISOString();
  return failures.length === 0
    ? { state: 'ready', checkedAt, destinations: destinations.length }
    : { state: 'preflight-failed', checkedAt, destinations: destinations.length, failures };
}

/**
 * The /readyz answer: a status and nothing else. Anyone who reaches the port may ask, and the
 * reasons (policy path, backend names, secret paths, error codes) map the deployment for an
 * attacker; they are in the audit trail (`daemon.preflight.failed`), where operators look.
 */
export function readinessAnswer(readiness: Readiness): {
  ready: boolean;
  body: { status: 'ok' | 'not-ready' };
} {
  const ready = readiness.state === 'ready';
  return { ready, body: { status: ready ? 'ok' : 'not-ready' } };
}
