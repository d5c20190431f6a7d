// How much life a key lock must have left before a roll attempt (invariant 9). A runner that
// lost its lock must never roll or write, and a roll answer must be followed by the write with
// no other I/O between (invariant 2), so the lock cannot be refreshed between the two: before
// each attempt the lock has to cover, on its own, the attempt at its timeout, the primary write
// with every retry and wait the store policy allows, and the clock skew other runners grant
// before they take a lock over. `validate` refuses a lockTtl shorter than that (no attempt could
// ever start), and the engine refreshes the lock before an attempt whenever less is left.
import type { BackendConfig } from '../backends/public/config.ts';

export interface LeaseInputs {
  /** The API's header and body timeouts: the longest one roll request can take. */
  rollAttemptMs: number;
  /** The primary backend's request timeout; 0 for local files (no timeout exists to bound them). */
  writeTimeoutMs: number;
  attempts: number;
  maxBackoffMs: number;
  clockSkewMs: number;
}

export function leaseNeededMs(inputs: LeaseInputs): number {
  return (
    inputs.rollAttemptMs +
    inputs.attempts * inputs.writeTimeoutMs +
    Math.max(0, inputs.attempts - 1) * inputs.maxBackoffMs +
    inputs.clockSkewMs
  );
}

/** The request timeout a backend instance's writes are bounded by. */
export function writeTimeoutOf(backend: BackendConfig | undefined): number {
  if (backend === undefined || !('timeoutMs' in backend)) return 0;
  return typeof backend.timeoutMs === 'number' ? backend.timeoutMs : 0;
}
