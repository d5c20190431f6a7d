// What a backend tells the process about its request quotas: a request that waited for its turn
// in the client-side bucket (paced), and one the server refused for its quota and that is being
// waited out (throttled). The runtime turns them into metrics (docs/metrics.md) and a debug audit
// line; neither is a failure (invariant 11).
import type { BackendOperation } from '../errors.ts';
import type { BackendKind } from '../types.ts';
import type { ThrottleWait } from './throttle.ts';

export interface QuotaEvent {
  backend: string;
  kind: BackendKind;
  /** The quota the request counts against (AWS: write, tag, read, create; Vault: request). */
  group: string;
  operation: BackendOperation;
  /** The secret the request addressed (a target or its lock companion); never a value. */
  path: string;
}

export interface QuotaObserver {
  paced?(event: QuotaEvent & { waitMs: number }): void;
  /**
   * `afterRoll`: a write reserved before a roll met the answer (src/backends/aws/pacing.ts). It is
   * retried by the store step, which audits it after the store; the observer must not do I/O for
   * it (invariant 2: between the roll answer and the write, nothing else does I/O).
   */
  throttled?(event: QuotaEvent & ThrottleWait & { afterRoll: boolean }): void;
}

/** How a backend shares its quotas: the observer, and how many shards spend the same budget. */
export interface QuotaDeps {
  observer?: QuotaObserver;
  /** Runners that share the account's budget at once (`run --shard i/N`: N); default 1. */
  shards?: number;
}
