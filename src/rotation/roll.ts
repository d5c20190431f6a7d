// The roll step, by what the API answers (docs/design.md, "Roll outcomes"):
//   200 → return at once (the caller stores before anything else);
//   401 → the whole run stops before more rolls; 400/402/403/404 → the key fails, no retry;
//   429 → wait Retry-After and try again within the budget;
//   5xx, timeout, reset → the outcome is unknown: probe the stored secret (200 = not rolled,
//   401 = rolled and lost), then roll again. Retrying a roll is always safe: a secret that was
//   never stored is used by nobody.
import { ApiError } from '../api/public/errors.ts';
import type { Secret } from '../audit/public/secret.ts';
import { catalogueCode, errorCode, errorMessage } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { backoffDelay } from './backoff.ts';
import { RotationStepError, RunAbortedError } from './errors.ts';
import type { ResolvedDestination, RotationDeps } from './types.ts';

export interface RollSuccess {
  keyId: string;
  secret: Secret;
  malformed?: string;
  /** Roll requests sent for this key (1 unless retried). */
  rolls: number;
  /** What the earlier unknown outcomes turned out to be, for the audit after the store. */
  unknownOutcomes: ProbeVerdict[];
}

export type ProbeVerdict = 'not-rolled' | 'rolled-and-lost' | 'no-stored-secret' | 'probe-failed';

const UNKNOWN_OUTCOME_BACKOFF = { initialMs: 500, maxMs: 10_000 };

const FAIL_HINTS: Record<number, string> = {
  400: 'the API refused the request as invalid: check the key id and organization in the policy',
  402: "the organization's plan does not allow API keys (PLAN_REQUIRED): restore the plan, then rotate",
  403: "keyroll's credential may not roll this key: rolling needs an owner or admin session or OAuth principal; an organization API key can never roll keys",
  404: 'the API has no such key: check the key id and organization in the policy',
};

/** Probes whether the secret stored at the primary destination still works. */
async function probeStoredSecret(
  key: KeyPolicy,
  primary: ResolvedDestination,
  deps: RotationDeps,
): Promise<ProbeVerdict> {
  try {
    const stored = await primary.backend.readSecret(primary.target);
    if (!stored) return 'no-stored-secret';
    const verdict = await deps.api.probeSecret(stored.secret, { organizationId: key.organizationId });
    return verdict === 'valid' ? 'not-rolled' : 'rolled-and-lost';
  } catch {
    return 'probe-failed';
  }
}

/**
 * What the roll loop has learned, kept by the caller so it survives a failure: an attempt whose
 * outcome was unknown may have rolled the key, and then the intent marker must stay whatever
 * the last attempt answered (invariant 6).
 */
export interface RollProgress {
  rolls: number;
  /** An attempt may have been applied by the API (5xx, timeout, reset, unreadable answer). */
  mayHaveRolled: boolean;
  /** What the stored-secret probe said after each unknown outcome. */
  verdicts: ProbeVerdict[];
}

/** Waits, turning a shutdown during the wait into a clean abort instead of a failure. */
async function waitOrAbort(deps: RotationDeps, ms: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await deps.sleep(ms, signal);
  } catch (error) {
    if (signal?.aborted)
      throw new RunAbortedError('shutdown', 'shutdown requested while waiting to roll again', error);
    throw error;
  }
}

/**
 * Invariant 9: every attempt first proves this runner still holds the key lock, long enough for
 * the attempt and the write after it (`before`, which throws when it does not: nothing is sent);
 * `after` runs when an attempt ends without a secret. After a secret, the caller ends the hold
 * once the store is done.
 */
export interface AttemptGuard {
  before(): Promise<void>;
  after(): void;
}

export async function rollWithRetries(
  key: KeyPolicy,
  primary: ResolvedDestination,
  deps: RotationDeps,
  progress: RollProgress,
  signal?: AbortSignal,
  guard?: AttemptGuard,
  /** The API key to roll: the key itself, or the slot of a two-slot entry (invariant 10). */
  rollKeyId: string = key.id,
): Promise<RollSuccess> {
  const audit = deps.audit;
  const unknownOutcomes = progress.verdicts;
  let waitedMs = 0;
  for (let attempt = 1; ; attempt++) {
    if (signal?.aborted) throw new RunAbortedError('shutdown', 'shutdown requested before the roll');
    await deps.checkpoint?.('roll');
    await guard?.before();
    try {
      progress.rolls++;
      const rolled = await deps.api.rollKey(rollKeyId, { organizationId: key.organizationId });
      return { ...rolled, rolls: progress.rolls, unknownOutcomes };
    } catch (error) {
      guard?.after();
      if (!(error instanceof ApiError)) {
        // Not an HTTP answer we understand (a bug or a network layer surprise): treat as unknown.
        progress.mayHaveRolled = true;
        if (attempt >= deps.rollBudget.attempts) throw rollFailed(key, error, attempt);
      } else if (error.status === 401) {
        throw new RunAbortedError(
          'credential-refused',
          "keyroll's own API credential was refused (401): check that it is set, valid and not expired",
          error,
        );
      } else if (error.status !== undefined && FAIL_HINTS[error.status] !== undefined) {
        throw new RotationStepError(
          'roll',
          key.id,
          error.code,
          FAIL_HINTS[error.status] ?? error.message,
          error,
        );
      } else if (error.status === 429) {
        const waitMs = error.retryAfterMs ?? backoffDelay(UNKNOWN_OUTCOME_BACKOFF, attempt);
        if (attempt >= deps.rollBudget.attempts || waitedMs + waitMs > deps.rollBudget.maxWaitMs) {
          throw new RotationStepError(
            'roll',
            key.id,
            error.code,
            'rate limited past the run budget; the next run retries',
            error,
          );
        }
        audit.emit('key.roll.retry', { step: 'roll', attempt, status: 429, errorCode: error.code, waitMs });
        waitedMs += waitMs;
        await waitOrAbort(deps, waitMs, signal);
        continue;
      } else if (!error.outcomeUnknown) {
        throw rollFailed(key, error, attempt);
      }
      // Outcome unknown: the API may have rolled. Find out what the stored secret says, then roll again.
      progress.mayHaveRolled = true;
      const verdict = await probeStoredSecret(key, primary, deps);
      unknownOutcomes.push(verdict);
      audit.emit('key.probe', { step: 'roll', attempt, errorCode: errorCode(error), verdict });
      if (attempt >= deps.rollBudget.attempts) throw rollFailed(key, error, attempt);
      const waitMs = backoffDelay(UNKNOWN_OUTCOME_BACKOFF, attempt);
      audit.emit('key.roll.retry', { step: 'roll', attempt, errorCode: errorCode(error), waitMs, verdict });
      waitedMs += waitMs;
      await waitOrAbort(deps, waitMs, signal);
    }
  }
}

function rollFailed(key: KeyPolicy, error: unknown, attempts: number): RotationStepError {
  return new RotationStepError(
    'roll',
    key.id,
    catalogueCode(error),
    `the roll did not succeed after ${attempts} attempt(s): ${errorMessage(error)}`,
    error,
  );
}
