// The store step: the only thing that runs between the roll answer and the first durable
// write (invariant 2). It performs backend writes and nothing else — no audit line, alert or
// metric — and returns a report the caller turns into audit events afterwards.
// A destination that stays down is retried with backoff (bounded), then the key's fallbacks,
// then the operators' escrow; the report says where the secret went (invariant 4).
// Every destination's write is fenced by that destination's lock (invariant 9). A write refused
// because the lock was lost (KR_LOCK_LOST) ends the store: another runner holds the key now, and
// this one writes nothing more anywhere, no other destination, fallback or escrow (the new holder
// finds this rotation's intent marker, probes and re-rolls). Fallbacks and escrow are not fenced:
// a fallback is a place in some backend that holds no lock of this key (locking every fallback
// before each roll, for the rare store that needs one, would cost requests on every rotation and
// could make a key busy for a place it may never use), and an escrow file is named by this
// rotation's id, so no other runner ever writes it. A copy that went to a fallback is reported as
// unfenced, and its alert says so.
import type { SecretRecord, WriteFence } from '../backends/public/types.ts';
import { errorCode } from '../errors.ts';
import { backoffDelay, type BackoffPolicy } from './backoff.ts';
import type { EscrowSettings, NonEmptyList, ResolvedDestination } from './types.ts';

export interface StorePolicy extends BackoffPolicy {
  /** Attempts per destination, the first included. */
  attempts: number;
}

export interface StoredCopy {
  destination: ResolvedDestination;
  role: 'destination' | 'fallback';
  version: string;
  attempts: number;
  alreadyApplied: boolean;
  /** monotonic ms when the write returned */
  atMs: number;
}

export interface FailedCopy {
  destination: ResolvedDestination;
  role: 'destination' | 'fallback';
  attempts: number;
  errorCode: string;
  error: unknown;
}

export interface StoreRetry {
  backend: string;
  path: string;
  attempt: number;
  errorCode: string;
  delayMs: number;
}

export interface StoreReport {
  stored: StoredCopy[];
  failed: FailedCopy[];
  /** Set when a fenced write was refused because this runner lost the lock: the store stopped there. */
  lockLost?: FailedCopy;
  retries: StoreRetry[];
  escrow?: { path: string; fingerprint: string } | { errorCode: string; error: unknown };
  /** monotonic ms of the first durable write (destination, fallback or escrow) */
  firstDurableAtMs?: number;
  /** True when every destination (not fallback) holds the new secret. */
  allDestinationsStored: boolean;
  /** True when the primary destination (which holds lock and intent) holds the new secret. */
  primaryStored: boolean;
}

export interface StoreOptions {
  policy: StorePolicy;
  sleep: (ms: number) => Promise<void>;
  monotonicMs: () => number;
  escrow?: EscrowSettings;
  sealToEscrow?: (input: {
    record: SecretRecord;
    directory: string;
    recipients: string[];
  }) => Promise<{ path: string; fingerprint: string }>;
  /**
   * The fence a destination's writes carry (invariant 9): its own lock, which the rotation holds,
   * read at each attempt so a refresh between retries is seen. Fallbacks have none.
   */
  fenceFor?: (destination: ResolvedDestination) => WriteFence | undefined;
  /**
   * Called once the primary holds the secret, before any other destination is written: the
   * secret is durable, so I/O may come now (invariant 2), and the lease checked before the roll
   * covered the roll and the primary's write only. The engine refreshes the locks here, so the
   * other destinations' fences are as fresh as they can be.
   */
  afterPrimary?: () => Promise<void>;
  /**
   * Runs a destination's write on the request budget reserved for it before the roll, so it is
   * sent at once (invariants 2 and 11; src/rotation/write-budget.ts). Fallbacks have none.
   */
  budgetFor?: <T>(destination: ResolvedDestination, write: () => Promise<T>) => Promise<T>;
}

async function writeWithRetries(
  destination: ResolvedDestination,
  role: StoredCopy['role'],
  record: SecretRecord,
  options: StoreOptions,
  retries: StoreRetry[],
): Promise<StoredCopy | FailedCopy> {
  const { policy } = options;
  let lastError: unknown;
  for (let attempt = 1; attempt <= policy.attempts; attempt++) {
    try {
      const fence = options.fenceFor?.(destination);
      const write = (): ReturnType<typeof destination.backend.writeSecret> =>
        fence === undefined
          ? destination.backend.writeSecret(destination.target, record)
          : destination.backend.writeSecret(destination.target, record, fence);
      const result = await (role === 'destination' && options.budgetFor
        ? options.budgetFor(destination, write)
        : write());
      return {
        destination,
        role,
        version: result.version,
        attempts: attempt,
        alreadyApplied: result.alreadyApplied,
        atMs: options.monotonicMs(),
      };
    } catch (error) {
      lastError = error;
      // A refused write (denied, not found) will not heal by waiting; move on to the next place.
      const retryable = (error as { retryable?: unknown }).retryable !== false;
      if (attempt === policy.attempts || !retryable) {
        return { destination, role, attempts: attempt, errorCode: errorCode(error), error };
      }
      const delayMs = backoffDelay(policy, attempt);
      retries.push({
        backend: destination.backendName,
        path: destination.target.path,
        attempt,
        errorCode: errorCode(error),
        delayMs,
      });
      await options.sleep(delayMs);
    }
  }
  return { destination, role, attempts: policy.attempts, errorCode: errorCode(lastError), error: lastError };
}

function isStored(copy: StoredCopy | FailedCopy): copy is StoredCopy {
  return 'version' in copy;
}

/** Writes `record` to every destination, falling back as invariant 4 says. Never throws. */
export async function storeSecret(
  record: SecretRecord,
  destinations: NonEmptyList<ResolvedDestination>,
  fallbacks: readonly ResolvedDestination[],
  options: StoreOptions,
): Promise<StoreReport> {
  const [primary] = destinations;
  const report: StoreReport = {
    stored: [],
    failed: [],
    retries: [],
    allDestinationsStored: false,
    primaryStored: false,
  };
  const note = (copy: StoredCopy | FailedCopy): void => {
    if (isStored(copy)) {
      report.stored.push(copy);
      report.firstDurableAtMs ??= copy.atMs;
    } else {
      report.failed.push(copy);
    }
  };

  // Destinations in policy order: the primary first, so the exposure window is one write long.
  for (const [index, destination] of destinations.entries()) {
    const copy = await writeWithRetries(destination, 'destination', record, options, report.retries);
    note(copy);
    if (!isStored(copy) && copy.errorCode === 'KR_LOCK_LOST') {
      report.lockLost = copy;
      break;
    }
    if (index === 0 && isStored(copy) && destinations.length > 1) await options.afterPrimary?.();
  }
  report.primaryStored = report.stored.some((copy) => copy.destination === primary);
  report.allDestinationsStored = report.lockLost === undefined && report.failed.length === 0;
  if (report.allDestinationsStored || report.lockLost !== undefined) return report;

  // Some destination stayed down: the first fallback that takes the secret is enough.
  for (const fallback of fallbacks) {
    const copy = await writeWithRetries(fallback, 'fallback', record, options, report.retries);
    note(copy);
    if (isStored(copy)) break;
  }
  if (report.stored.length > 0) return report;

  // Nothing durable yet: seal it to the operators' age keys as a last resort.
  if (options.escrow && options.sealToEscrow) {
    try {
      const sealed = await options.sealToEscrow({
        record,
        directory: options.escrow.directory,
        recipients: options.escrow.recipients,
      });
      report.escrow = sealed;
      report.firstDurableAtMs ??= options.monotonicMs();
    } catch (error) {
      report.escrow = { errorCode: errorCode(error), error };
    }
  }
  return report;
}
