// Shapes of the consumers' refresh (invariant 12): a value a rotation stored and who must pick it
// up, how each consumer fared, and the hooks the metrics hear.
import type { SuccessNotice } from '../alerts/public/types.ts';
import type { ConsumerRef, KubeConsumerKind } from '../policy/public/consumers.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import type { RotationReason } from '../rotation/public/types.ts';

/**
 * How soon the consumers of a stored value must have it: `now` when the value they hold died (a
 * leak, a single key, a drift heal: restarts ignore the restart window), `window` when it still
 * works (a slot rotation with refreshConsumers: always: restarts wait for the window).
 */
export type Urgency = 'now' | 'window';

/** A new value a rotation stored, and why its consumers must pick it up. */
export interface StoredValue {
  key: KeyPolicy;
  rotationId: string;
  /** Milliseconds since the epoch: the store (roll answer + exposure window). */
  storedAtMs: number;
  reason: RotationReason;
  urgency: Urgency;
  /** The webhook notice of it (key, rotation, destinations and versions; never the secret). */
  notice: SuccessNotice;
}

export type ConsumerKind = KubeConsumerKind | 'webhook';

/**
 * refreshed: the consumer holds the new value (synced, rolled out, notified). failed: it could not
 * be refreshed (audited, alerted). deferred: its restart waits for the restart window (recorded on
 * the workload). skipped: another runner already restarted it for these rotations.
 */
export type ConsumerResult = 'refreshed' | 'failed' | 'deferred' | 'skipped';
export const CONSUMER_RESULTS: readonly ConsumerResult[] = ['refreshed', 'failed', 'deferred', 'skipped'];
export const CONSUMER_KINDS: readonly ConsumerKind[] = [
  'externalSecret',
  'vaultStaticSecret',
  'deployment',
  'statefulSet',
  'daemonSet',
  'webhook',
];

export interface ConsumerOutcome {
  consumer: ConsumerRef;
  result: ConsumerResult;
  keyIds: string[];
  rotationIds: string[];
  /** When the consumer was told (force-sync annotated, restart patched, notice delivered). */
  notifiedAtMs?: number;
  /** When it held the new value (synced, rollout complete, notice delivered). */
  refreshedAtMs?: number;
  errorCode?: string;
  error?: string;
  /** What a person runs by hand (failed), or when the window opens (deferred). */
  nextAction?: string;
  /** A workload Stakater Reloader restarted (kinds/reloader.ts): keyroll proved its rollout and did not restart it again. */
  restartedBy?: 'reloader';
}

/** What one delivery (one run, one sweep, one pick-up of owed restarts) did. */
export interface DeliveryReport {
  deliveryId: string;
  outcomes: ConsumerOutcome[];
  refreshed: number;
  failed: number;
  deferred: number;
  skipped: number;
}

/** The metrics' hooks (src/metrics/), called after the fact. */
export interface ConsumerObserver {
  /** One consumer's outcome. */
  consumerDone(kind: ConsumerKind, result: ConsumerResult): void;
  /** A stored value reached every consumer that had to pick it up, `ms` after its store. */
  allRefreshed(ms: number): void;
}
