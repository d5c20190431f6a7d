// What a run does with one key, decided before anything is done (run.ts executes it): the read of
// the key's state, its failure streak, its schedule and a drift probe lead to exactly one plan, so
// the run reports each key once, from one place.
import type { AuditLog } from '../audit/public/events.ts';
import type { KeyState } from '../backends/public/types.ts';
import { decideDue, type DueReason } from '../policy/public/due.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { automaticAttemptGate, type AttemptGate } from './failure-streak.ts';
import { driftCheckDue, probeForDrift, type DriftReport } from './drift.ts';
import { auditDoubts, readTrustedState } from './trusted-state.ts';
import type { ResolvedKey, RotationDeps, RunAbortReason, RunTrigger } from './types.ts';

/** Drift probes of keys that are not due (RunOptions.driftCheck). */
export type DriftCheckMode = 'policy' | 'every-run' | 'off';

export type KeyPlan =
  /** The run stopped (credential refused, shutdown, lost leadership) before this key started. */
  | { kind: 'aborted'; why: RunAbortReason }
  /** Another runner in this process took the key over before its work started (RunOptions.mayStart). */
  | { kind: 'in-flight' }
  /** Secrets Manager starts this key's scheduled rotations (src/lambda/). */
  | { kind: 'native' }
  /** In a failure streak: waits out its backoff, or stays quarantined. */
  | { kind: 'held-back'; resolved: ResolvedKey; gate: Exclude<AttemptGate, { kind: 'go' }> }
  /** Not due; `drift` is the probe made meanwhile, when one was. */
  | { kind: 'not-due'; state: KeyState; nextRunAt?: Date; drift?: DriftReport }
  /** Not due, but its stored value (or a two-slot entry's standby, `slot`) is dead and onDrift heals it. */
  | { kind: 'drift-heal'; resolved: ResolvedKey; state: KeyState; slot?: string }
  /** Due, or asked for: `knownState` is the state read before the lock, when the run read one. */
  | { kind: 'rotate'; resolved: ResolvedKey; reasons: DueReason[]; knownState?: KeyState };

export interface PlanContext {
  trigger: RunTrigger;
  deps: RotationDeps;
  audit: AuditLog;
  driftCheck: DriftCheckMode;
  /** Why the run stopped starting keys, if it did. */
  stopped: () => RunAbortReason | undefined;
  resolveKey: (key: KeyPolicy) => ResolvedKey;
  /** Asked as the key's own work starts (RunOptions.mayStart). */
  mayStart?: (key: KeyPolicy) => boolean;
  /** Told once the key's own work starts (RunOptions.onKeyStarted). */
  onKeyStarted?: (keyId: string) => void;
}

/** Throws when the key's state cannot be read (the run reports it as a preflight failure). */
export async function planKey(key: KeyPolicy, ctx: PlanContext): Promise<KeyPlan> {
  const { trigger, deps, audit } = ctx;
  const why = ctx.stopped();
  if (why !== undefined) return { kind: 'aborted', why };
  if (ctx.mayStart?.(key) === false) return { kind: 'in-flight' };
  // One scheduler per secret: Secrets Manager starts this key's scheduled rotations (src/lambda/).
  if (key.scheduler === 'aws-native' && (trigger.reason === 'scheduled' || trigger.reason === 'drift'))
    return { kind: 'native' };
  // The key's own work starts here: every plan below reads or rolls it.
  ctx.onKeyStarted?.(key.id);
  const resolved = ctx.resolveKey(key);
  if (trigger.force || trigger.ignoreSchedule) return { kind: 'rotate', resolved, reasons: [] };
  const state = await readTrustedState(resolved.primary, key, deps.now());
  auditDoubts(audit, state, { keyId: key.id, organizationId: key.organizationId });
  // Automatic attempts of a key in a failure streak wait out its backoff, and stop once it is
  // quarantined; a key with an intent marker is always let through (invariant 6).
  const gate = automaticAttemptGate(state, deps.now());
  if (gate.kind !== 'go') return { kind: 'held-back', resolved, gate };
  const decision = decideDue(
    key,
    {
      ...(state.lastRotatedAt ? { lastRotatedAt: state.lastRotatedAt } : {}),
      ...(state.intent ? { intent: state.intent } : {}),
    },
    deps.now(),
  );
  if (decision.due) return { kind: 'rotate', resolved, reasons: decision.reasons, knownState: state };
  const drift = await checkDriftIfDue(key, resolved, state, ctx.driftCheck, deps);
  const heal = drift === undefined ? undefined : driftHeal(key, drift);
  if (heal !== undefined) return { kind: 'drift-heal', resolved, state, ...heal };
  return {
    kind: 'not-due',
    state,
    ...(decision.nextRunAt ? { nextRunAt: decision.nextRunAt } : {}),
    ...(drift ? { drift } : {}),
  };
}

/**
 * What `onDrift: rotate` heals: a dead stored secret by rolling it (a slot entry's active slot),
 * else a dead standby by rolling the standby (never the active slot: its value still works).
 */
function driftHeal(key: KeyPolicy, drift: DriftReport): { slot?: string } | undefined {
  if (key.onDrift !== 'rotate') return undefined;
  if (drift.stored === 'dead') return {};
  if (drift.stored === 'works' && drift.standby?.verdict === 'dead') return { slot: drift.standby.keyId };
  return undefined;
}

async function checkDriftIfDue(
  key: KeyPolicy,
  resolved: ResolvedKey,
  state: KeyState,
  mode: DriftCheckMode,
  deps: RotationDeps,
): Promise<DriftReport | undefined> {
  if (mode === 'off') return undefined;
  // A marker keyroll could not read at all is probed for at once: recovery would start there.
  const markerUnread =
    state.doubts?.some((doubt) => doubt.record === 'intent' && doubt.action === 'ignored') === true;
  if (mode === 'policy' && !markerUnread && !driftCheckDue(key, state, deps.now())) return undefined;
  if (mode === 'every-run' && !state.exists) return undefined;
  // The state the run just read names the active slot for the alert's advice; no second read.
  return probeForDrift(key, resolved.destinations, deps, state);
}
