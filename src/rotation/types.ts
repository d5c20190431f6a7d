// Shapes shared by the rotation steps, the orchestrator and the commands.
import type { Alerter } from '../alerts/public/types.ts';
import type { AuditLog } from '../audit/public/events.ts';
import type { Secret } from '../audit/public/secret.ts';
import type { QuotaObserver } from '../backends/public/quota/observer.ts';
import type { Backend, StoreTarget } from '../backends/public/types.ts';
import type { ErrorCode } from '../error-codes.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';

export type RotationStep =
  'preflight' | 'lock' | 'intent' | 'roll' | 'store' | 'verify' | 'finish' | 'recovery' | 'drift';
export const ROTATION_STEPS: readonly RotationStep[] = [
  'preflight',
  'lock',
  'intent',
  'roll',
  'store',
  'verify',
  'finish',
];

export type RotationReason =
  'scheduled' | 'leak' | 'compromise' | 'plan-change' | 'manual' | 'recovery' | 'drift';

/**
 * Leak and compromise: the value must die now, so their rotations bypass the minimum interval
 * (invariant 5) and a two-slot entry rolls the leaked slot whatever consumerRefresh says
 * (invariant 10). Every command and endpoint that starts rotations asks this one question.
 */
export function isLeakReason(reason: string): reason is 'leak' | 'compromise' {
  return reason === 'leak' || reason === 'compromise';
}

/** Why a run stopped before finishing (docs/exit-codes.md, exit 3; `run.aborted`'s `why`). */
export type RunAbortReason =
  | 'credential-refused'
  | 'credential-unavailable'
  | 'api-unreachable'
  | 'lock-contention'
  | 'shutdown'
  | 'lost-leadership';

/** Why and by whom a run was started; recorded on every audit event of on-demand runs. */
export interface RunTrigger {
  reason: RotationReason;
  /** Rotate even when not due and inside the minimum interval (leak, compromise and --force). */
  force: boolean;
  /** Rotate even when not due, but respect the minimum interval (`rotate` without --force). */
  ignoreSchedule?: boolean;
  actor?: string;
  ticket?: string;
}

/** The part of the API client the rotation needs (src/api/client.ts implements it). */
export interface RotationApi {
  rollKey(
    keyId: string,
    options?: { organizationId?: string; signal?: AbortSignal },
  ): Promise<{ keyId: string; secret: Secret; malformed?: string }>;
  probeSecret(secret: Secret, options?: { organizationId?: string }): Promise<'valid' | 'invalid'>;
}

/** A destination resolved to its backend instance. */
export interface ResolvedDestination {
  backendName: string;
  backend: Backend;
  target: StoreTarget;
}

/** A list with at least one element: what the compiler can check instead of an index that may be absent. */
export type NonEmptyList<T> = [T, ...T[]];

/**
 * A key's destinations resolved once (runtime.ts): the primary holds the lock and the intent marker
 * and is the one read for the key's state; `destinations` is every one, the primary first.
 */
export interface ResolvedKey {
  destinations: NonEmptyList<ResolvedDestination>;
  primary: ResolvedDestination;
  /** The destinations after the primary; each receives the new secret too. */
  others: ResolvedDestination[];
  /** Tried in order when a destination stays down (invariant 4). */
  fallbacks: ResolvedDestination[];
}

export interface EscrowSettings {
  directory: string;
  recipients: string[];
}

/** Everything one key's rotation talks to. */
export interface RotationDeps {
  api: RotationApi;
  audit: AuditLog;
  alerter: Alerter;
  escrow?: EscrowSettings;
  /** Identifies this runner in locks and intents (src/rotation/lock-owner.ts: host/pid/random, or its pod). */
  owner: string;
  /**
   * Proves a lock's holder dead (issue 30; src/leader/holder-liveness.ts, in Kubernetes only): a
   * rotation that meets another runner's lock asks it, and takes the lock over at once on a proof.
   * Absent: a lock waits for its TTL.
   */
  holderProver?: HolderProver;
  now: () => Date;
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  newRotationId: () => string;
  /** Monotonic milliseconds, for durations and the exposure window. */
  monotonicMs: () => number;
  /**
   * The lease a key lock must have left before a roll attempt: the attempt and the primary write
   * with all its retries (src/policy/lease.ts; invariant 9). Absent: only "still held" is checked.
   */
  leaseNeededMs?: (key: KeyPolicy) => number;
  /** Budget for 429 waits and unknown-outcome re-rolls of one key. */
  rollBudget: { attempts: number; maxWaitMs: number };
  /** Metrics hooks (the daemon and the Pushgateway export); called after the fact, never between roll and store. */
  observer?: RotationObserver;
  /**
   * A single key's new value is in every destination (invariant 12): its old value died at the
   * roll, so its consumers are told now rather than after verify. Called after the store, never
   * between roll and store (invariant 2); it must not block: the rotation goes on at once.
   */
  onStored?: (outcome: KeyOutcome) => void;
  /** Test-only pause points (crash tests); a no-op in production. */
  checkpoint?: (step: string) => Promise<void>;
}

/** Why a lock holder is known dead: a kind and its facts (audited as they are; never a secret). */
export type HolderDeathProof = { readonly kind: string } & Readonly<Record<string, string>>;

export interface HolderProver {
  /** A proof that `owner` is dead, or undefined when it is not proven (the lock then waits for its TTL). */
  proveDead(owner: string, skewMs: number): Promise<HolderDeathProof | undefined>;
}

/** Metrics hooks of the engine; the request-quota hooks come from the backends (src/backends/quota/). */
export interface RotationObserver extends QuotaObserver {
  stepDuration(step: RotationStep, ms: number): void;
  /** Roll answer → first durable write. */
  exposure(ms: number): void;
}

export type KeyResult = 'rotated' | 'failed' | 'skipped' | 'busy' | 'recovered' | 'aborted';

/**
 * Why a key was left alone although nothing failed: before its lock (run-key.ts: not due, started
 * by Secrets Manager, in backoff, quarantined) or under it (step-decide.ts). Consumers of outcomes
 * (the daemon, metrics) compare against this union, so a renamed reason fails the type check.
 */
export type SkipReason =
  | 'not-due'
  | 'aws-native'
  | 'backoff'
  | 'quarantined'
  | 'min-interval'
  | 'already-rotated'
  | 'intent-kept'
  | 'drift-healed'
  | 'active-slot'
  | 'consumer-refresh'
  /** Another runner in this process (a leak, a trigger) took the key over before its work started. */
  | 'in-flight'
  /** A leak that waited for its key's roll: that roll already killed the reported value (no roll needed). */
  | 'already-dead';

/** What every outcome says about its key, whatever came of it. */
export interface OutcomeFacts {
  keyId: string;
  organizationId: string;
  rotationId?: string;
  /** True when the secret ended up only in a fallback or escrow, or nowhere. */
  degraded?: boolean;
  /** Roll answer → first durable write, in ms. */
  exposureMs?: number;
  durationMs: number;
  versions?: { backend: string; path: string; version: string }[];
  /** How many times the API was asked to roll this key in this run. */
  rolls: number;
  /** Two-slot entries: the slot this rotation rolled (the active one once it succeeded). */
  rolledKeyId?: string;
  /** ISO-8601: the key is quarantined since then (skipped as quarantined, or quarantined by this failure). */
  quarantinedAt?: string;
  /** A new value was stored and verified: the ISO-8601 time of the roll answer. */
  rotatedAt?: string;
  /** Why the rotation that stored it ran (drift for a drift heal, whatever the run's reason). */
  reason?: RotationReason;
  /**
   * Two-slot entries that rolled the standby: whether the value consumers held before (the
   * previous active slot's) still works after the store. False or absent: it died, so consumers
   * must pick up the new one now (invariant 12).
   */
  previousActiveWorks?: boolean;
}

/** Outcomes that did not fail carry no step and no code. */
interface NoFailure {
  step?: undefined;
  errorCode?: undefined;
}

/** How one key ended: `result` tells the variants apart (outcome.ts builds them). */
export type OutcomeEnd =
  | (NoFailure & {
      result: 'rotated' | 'recovered';
      detail?: 'malformed-roll-answer' | 'stored-secret-works';
    })
  | (NoFailure & { result: 'skipped'; detail: SkipReason })
  /** Another runner holds the key's lock (invariant 5). */
  | (NoFailure & { result: 'busy'; detail: 'lock-busy' })
  /** The run stopped before this key started, or while it rolled. */
  | (NoFailure & { result: 'aborted'; detail: RunAbortReason })
  /** A step failed: its code is from the catalogue (src/error-codes.ts); `detail` is the error's message. */
  | { result: 'failed'; step: RotationStep; errorCode: ErrorCode; detail?: string };

export type KeyOutcome = OutcomeFacts & OutcomeEnd;
