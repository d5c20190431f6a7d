// The checks before a roll (invariant 1) and the guards that keep the roll safe once it
// starts: every destination writable, credentials renewed so nothing renews between the roll
// answer and the write (invariant 2). The lock's life is src/rotation/lock-keeper.ts's (invariant 9).
import type { AuditLog } from '../audit/public/events.ts';
import type { WriteCheck } from '../backends/public/types.ts';
import { catalogueCode, errorCode, errorMessage } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { RotationStepError } from './errors.ts';
import type { ResolvedDestination } from './types.ts';

export async function preflightDestinations(
  key: KeyPolicy,
  destinations: readonly ResolvedDestination[],
  fallbacks: readonly ResolvedDestination[],
  audit: AuditLog,
): Promise<void> {
  const checks: { backend: string; path: string; exists: boolean }[] = [];
  for (const [index, destination] of destinations.entries()) {
    try {
      // Every destination's lock comes next, and the primary's intent marker, before any roll.
      const result = await destination.backend.preflight(
        destination.target,
        index === 0 ? 'rotation-primary' : 'rotation',
      );
      checks.push({ backend: destination.backendName, path: destination.target.path, exists: result.exists });
    } catch (error) {
      audit.emit('key.preflight.failed', {
        step: 'preflight',
        backend: destination.backendName,
        path: destination.target.path,
        errorCode: errorCode(error),
      });
      throw new RotationStepError(
        'preflight',
        key.id,
        catalogueCode(error),
        `destination ${destination.backendName}:${destination.target.path} failed preflight: ${errorMessage(error)}`,
        error,
      );
    }
  }
  // Fallbacks are the safety net, not the target: a broken one is reported, not fatal.
  const fallbackIssues: { backend: string; path: string; errorCode: string }[] = [];
  for (const fallback of fallbacks) {
    try {
      await fallback.backend.preflight(fallback.target);
    } catch (error) {
      fallbackIssues.push({
        backend: fallback.backendName,
        path: fallback.target.path,
        errorCode: errorCode(error),
      });
    }
  }
  audit.emit('key.preflight.passed', { step: 'preflight', destinations: checks, fallbackIssues });
}

/**
 * How long credentials must stay valid: the roll (attempts with timeouts and waits) plus the
 * store (bounded retries per destination) fit in about five minutes, and in the lock's TTL.
 */
const MAX_FRESHNESS_MS = 5 * 60_000;

export async function ensureFreshCredentials(
  key: KeyPolicy,
  places: readonly ResolvedDestination[],
): Promise<void> {
  const seen = new Set<WriteCheck>();
  for (const place of places) {
    if (seen.has(place.backend)) continue;
    seen.add(place.backend);
    try {
      await place.backend.ensureFresh?.(Math.min(key.lockTtlMs, MAX_FRESHNESS_MS));
    } catch (error) {
      throw new RotationStepError(
        'preflight',
        key.id,
        catalogueCode(error),
        `credentials of backend ${place.backendName} cannot be made to last the rotation: ${errorMessage(error)}`,
        error,
      );
    }
  }
}
