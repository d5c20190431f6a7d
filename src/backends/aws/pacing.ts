// Every Secrets Manager call waits for its turn in the quota it counts against (invariant 11):
// one token bucket per endpoint, region and quota group, shared by every backend instance and
// every key of the process (src/backends/quota/), sized from AWS's documented quotas (quotas.ts)
// and divided among shards. A ThrottlingException that still gets through (another writer in the
// account spent the budget) pauses the group's bucket for every caller and is waited out and sent
// again within the call's budget (`quotas.maxWaitMs`), counted; only a call still refused when
// its budget is spent fails, with KR_BACKEND_THROTTLED.
// Invariant 2 under quotas: before a key is rolled, the engine reserves the write after the roll
// (`reserve`: the put and the stage move of the fenced write). Those calls then spend the tokens
// taken before the roll and are sent at once: nothing waits for a turn between the roll answer
// and the write. A reservation is spent only by the calls made inside its `use` (the engine runs
// the write it was made for there): the same secret carries the key lock, and a lock refresh
// between the reservation and the roll (same path, same write quota) must not spend the write's
// turn and leave the rolled secret waiting in the account's queue (issue 27). A reserved call that meets a throttle answer anyway is not waited out here: it
// fails at once with KR_BACKEND_THROTTLED (retryable), the bucket is paused for every caller, and
// the store step retries it with its own backoff, within the lease it computed
// (src/policy/lease.ts), and audits each retry after the store (key.store.retry), never between
// the roll answer and the write. The observer still counts it (in memory, no I/O).
import { AsyncLocalStorage } from 'node:async_hooks';
import { BackendError, type BackendOperation } from '../errors.ts';
import type { QuotaDeps, QuotaEvent } from '../quota/observer.ts';
import { sharedBucket } from '../quota/shared-buckets.ts';
import { retryThrottled, throttleBackoffMs } from '../quota/throttle.ts';
import type { TokenBucket } from '../quota/token-bucket.ts';
import { awsErrorName, awsHttpStatus, type AwsAction } from './errors.ts';
import { QUOTA_GROUP_OF, ratesOf, type AwsQuotaGroup, type AwsQuotas } from './quotas.ts';

/** Names AWS (and the SDK) give an answer refused for a request quota. */
const THROTTLE_NAMES: ReadonlySet<string> = new Set([
  'ThrottlingException',
  'Throttling',
  'TooManyRequestsException',
  'RequestLimitExceeded',
  'ThrottledException',
  'RequestThrottledException',
]);

export function isThrottleAnswer(error: unknown): boolean {
  return THROTTLE_NAMES.has(awsErrorName(error)) || awsHttpStatus(error) === 429;
}

/** Runs `run`; any answer but a throttle one (an error included: AWS answered) lets the rate recover. */
async function answered<T>(bucket: TokenBucket, run: () => Promise<T>): Promise<T> {
  try {
    const result = await run();
    bucket.answered();
    return result;
  } catch (error) {
    if (!isThrottleAnswer(error)) bucket.answered();
    throw error;
  }
}

export interface PacedCall {
  action: AwsAction;
  operation: BackendOperation;
  /** The secret addressed: the credit a reservation left is per secret. */
  path: string;
}

/** Tokens taken before a roll for the write after it; `release` gives back what the write did not spend. */
export interface QuotaReservation {
  /** Runs `calls` (the write the reservation was made for): only the calls they make spend its tokens. */
  use<T>(calls: () => Promise<T>): Promise<T>;
  release(): void;
}

/** The reservations whose calls are running in this async context (nested `use`, innermost last). */
const inUse = new AsyncLocalStorage<readonly Reserved[]>();

/** One reservation: tokens taken from `buckets` for calls of `owner` on `path`, not spent yet. */
class Reserved implements QuotaReservation {
  readonly #owner: AwsPacer;
  readonly #path: string;
  readonly #buckets: Buckets;
  readonly #left = new Map<AwsQuotaGroup, number>();
  #released = false;

  constructor(owner: AwsPacer, path: string, buckets: Buckets, taken: readonly [AwsQuotaGroup, number][]) {
    this.#owner = owner;
    this.#path = path;
    this.#buckets = buckets;
    for (const [group, count] of taken) this.#left.set(group, (this.#left.get(group) ?? 0) + count);
  }

  /** Takes one token of `group` for a call of `pacer` on `path`, when this reservation holds one. */
  spend(pacer: AwsPacer, path: string, group: AwsQuotaGroup): boolean {
    const left = this.#left.get(group) ?? 0;
    if (this.#released || pacer !== this.#owner || path !== this.#path || left <= 0) return false;
    this.#left.set(group, left - 1);
    return true;
  }

  use<T>(calls: () => Promise<T>): Promise<T> {
    return inUse.run([...(inUse.getStore() ?? []), this], calls);
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    for (const [group, left] of this.#left) if (left > 0) this.#buckets[group].giveBack(left);
    this.#left.clear();
  }
}

export interface AwsPacerOptions {
  backendName: string;
  quotas: AwsQuotas;
  deps: QuotaDeps;
  /** Where the budget is spent: the endpoint and region (resolved once the SDK is loaded). */
  scope: () => Promise<string>;
}

type Buckets = Readonly<Record<AwsQuotaGroup, TokenBucket>>;

export class AwsPacer {
  readonly #options: AwsPacerOptions;
  #buckets: Promise<Buckets> | undefined;

  constructor(options: AwsPacerOptions) {
    this.#options = options;
  }

  /** Sends `run` in its turn, waiting out throttle answers within the call's budget. */
  async send<T>(call: PacedCall, run: () => Promise<T>): Promise<T> {
    const group = QUOTA_GROUP_OF[call.action];
    const bucket = (await this.#bucketsFor())[group];
    const event = this.#event(call, group);
    const { quotas, deps } = this.#options;
    if (this.#spendReserved(call.path, group)) {
      // Reserved before the roll: sent at once (invariant 2); a throttle answer is the store's to retry.
      try {
        return await answered(bucket, run);
      } catch (error) {
        if (isThrottleAnswer(error)) {
          const waitMs = throttleBackoffMs(1);
          bucket.pause(waitMs);
          deps.observer?.throttled?.({ ...event, attempt: 1, waitMs, afterRoll: true });
        }
        throw error;
      }
    }
    return retryThrottled(
      async (remainingMs) => {
        const waitedMs = await bucket.take(1, { maxWaitMs: remainingMs });
        if (waitedMs === undefined) throw this.#tooLong(call, group);
        if (waitedMs > 0) deps.observer?.paced?.({ ...event, waitMs: waitedMs });
        return answered(bucket, run);
      },
      {
        maxWaitMs: quotas.maxWaitMs,
        throttleOf: (error) => (isThrottleAnswer(error) ? {} : undefined),
        pause: (ms) => {
          bucket.pause(ms);
        },
        onThrottled: (wait) => deps.observer?.throttled?.({ ...event, ...wait, afterRoll: false }),
      },
    );
  }

  /**
   * Takes `counts` tokens for calls on `path` now, before the roll, so they are sent without a
   * wait after it, when they run inside the reservation's `use`. Waits for the turn like any call
   * (at most `maxWaitMs`, else KR_BACKEND_THROTTLED).
   */
  async reserve(
    path: string,
    counts: Partial<Record<AwsQuotaGroup, number>>,
    operation: BackendOperation = 'write',
  ): Promise<QuotaReservation> {
    const buckets = await this.#bucketsFor();
    const taken: [AwsQuotaGroup, number][] = [];
    try {
      for (const [group, count] of Object.entries(counts) as [AwsQuotaGroup, number][]) {
        if (count <= 0) continue;
        const waitedMs = await buckets[group].take(count, { maxWaitMs: this.#options.quotas.maxWaitMs });
        if (waitedMs === undefined)
          throw this.#tooLong(
            { action: group === 'create' ? 'CreateSecret' : 'PutSecretValue', operation, path },
            group,
          );
        if (waitedMs > 0)
          this.#options.deps.observer?.paced?.({
            ...this.#event({ action: 'PutSecretValue', operation, path }, group),
            waitMs: waitedMs,
          });
        taken.push([group, count]);
      }
    } catch (error) {
      for (const [group, count] of taken) buckets[group].giveBack(count);
      throw error;
    }
    return new Reserved(this, path, buckets, taken);
  }

  /** A token of a reservation in use here (innermost first) for this call, spent; false when none. */
  #spendReserved(path: string, group: AwsQuotaGroup): boolean {
    const running = inUse.getStore() ?? [];
    for (let i = running.length - 1; i >= 0; i--) if (running[i]?.spend(this, path, group)) return true;
    return false;
  }

  #bucketsFor(): Promise<Buckets> {
    this.#buckets ??= this.#options.scope().then((scope) => {
      const { quotas, deps } = this.#options;
      const share = quotas.shareAmongShards ? Math.max(1, deps.shards ?? 1) : 1;
      const rates = ratesOf(quotas);
      const bucket = (group: AwsQuotaGroup): TokenBucket =>
        sharedBucket(`aws ${scope} ${group}`, { ratePerSecond: rates[group] / share });
      return { write: bucket('write'), tag: bucket('tag'), read: bucket('read'), create: bucket('create') };
    });
    return this.#buckets;
  }

  #event(call: PacedCall, group: AwsQuotaGroup): QuotaEvent {
    return {
      backend: this.#options.backendName,
      kind: 'aws',
      group,
      operation: call.operation,
      path: call.path,
    };
  }

  #tooLong(call: PacedCall, group: AwsQuotaGroup): BackendError {
    const { quotas, backendName } = this.#options;
    return new BackendError(
      'KR_BACKEND_THROTTLED',
      `aws ${call.action} on ${call.path}: the ${group} quota of this account and region (paced at ${String(ratesOf(quotas)[group])}/s) has no turn free within ${String(quotas.maxWaitMs)} ms`,
      { backend: backendName, kind: 'aws', operation: call.operation, path: call.path },
    );
  }
}
