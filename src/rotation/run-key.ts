// One key of a run: its plan (key-plan.ts) carried out, and the one outcome the run reports for it.
// Every way a key ends (not started, held back, not due, healed, rotated, failed before the lock)
// passes through runKey, so the run's onKeyDone hears each key exactly once.
import type { AuditLog } from '../audit/public/events.ts';
import { catalogueCode, errorCode, errorMessage, typedCode } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import type { AttemptGate } from './failure-streak.ts';
import { RunAbortedError } from './errors.ts';
import { planKey, type KeyPlan, type PlanContext } from './key-plan.ts';
import { factsOf, keyOutcome, notStartedFacts } from './outcome.ts';
import { remindQuarantined } from './quarantine.ts';
import { rotateKey } from './rotate-key.ts';
import type { KeyOutcome, ResolvedDestination, RunAbortReason } from './types.ts';

export interface KeyRunContext extends PlanContext {
  runId: string;
  signal?: AbortSignal;
  rotationIds?: ReadonlyMap<string, string>;
  slots?: ReadonlyMap<string, string>;
  credentialDescription: string;
  /** Stops the run from starting further keys (the first reason wins). */
  abortRun: (reason: RunAbortReason, message: string) => void;
  onKeyDone?: (outcome: KeyOutcome) => void;
}

export async function runKey(key: KeyPolicy, ctx: KeyRunContext): Promise<KeyOutcome> {
  let outcome: KeyOutcome;
  try {
    outcome = await executeKeyPlan(key, await planKey(key, ctx), ctx);
  } catch (error) {
    outcome = await keyStopped(key, error, ctx);
  }
  ctx.onKeyDone?.(outcome);
  return outcome;
}

function executeKeyPlan(key: KeyPolicy, plan: KeyPlan, ctx: KeyRunContext): Promise<KeyOutcome> {
  const { audit, deps, trigger } = ctx;
  const ids = { keyId: key.id, organizationId: key.organizationId };
  switch (plan.kind) {
    case 'aborted':
      // The audit trail is the record in non-terminal runs: it names every key left unrotated.
      audit.emit('key.skipped', { ...ids, why: 'aborted', abortReason: plan.why });
      return Promise.resolve(keyOutcome(notStartedFacts(key), { result: 'aborted', detail: plan.why }));
    case 'in-flight':
      audit.emit('key.skipped', { ...ids, why: 'in-flight' });
      return Promise.resolve(keyOutcome(notStartedFacts(key), { result: 'skipped', detail: 'in-flight' }));
    case 'native':
      audit.emit('key.skipped', { ...ids, why: 'aws-native' });
      return Promise.resolve(keyOutcome(notStartedFacts(key), { result: 'skipped', detail: 'aws-native' }));
    case 'held-back':
      return holdBack(key, plan.resolved.primary, plan.gate, ctx);
    case 'not-due':
      return Promise.resolve(notDue(key, plan, audit));
    case 'drift-heal':
      return healDrift(key, plan, ctx);
    case 'rotate': {
      const rotationId = ctx.rotationIds?.get(key.id);
      const slot = ctx.slots?.get(key.id);
      const { destinations, fallbacks } = plan.resolved;
      return rotateKey(
        {
          key,
          destinations,
          fallbacks,
          trigger,
          reasons: plan.reasons,
          ...(plan.knownState ? { knownState: plan.knownState } : {}),
          ...(slot ? { slot } : {}),
          ...(ctx.signal ? { signal: ctx.signal } : {}),
          ...(rotationId ? { rotationId } : {}),
        },
        deps,
      );
    }
  }
}

/** Not due: skipped, unless the drift probe made meanwhile found a dead value it does not heal. */
function notDue(key: KeyPolicy, plan: Extract<KeyPlan, { kind: 'not-due' }>, audit: AuditLog): KeyOutcome {
  const { state, drift } = plan;
  audit.emit('key.skipped', {
    keyId: key.id,
    organizationId: key.organizationId,
    why: 'not-due',
    lastRotatedAt: state.lastRotatedAt,
    nextRunAt: plan.nextRunAt?.toISOString(),
  });
  const dead =
    drift?.stored === 'dead'
      ? 'KR_DRIFT_DETECTED'
      : drift?.standby?.verdict === 'dead'
        ? 'KR_DRIFT_STANDBY_DEAD'
        : undefined;
  if (dead === undefined) return keyOutcome(notStartedFacts(key), { result: 'skipped', detail: 'not-due' });
  return keyOutcome(notStartedFacts(key), {
    result: 'failed',
    detail: dead === 'KR_DRIFT_DETECTED' ? 'drift' : 'drift-standby',
    step: 'drift',
    errorCode: dead,
  });
}

async function healDrift(
  key: KeyPolicy,
  plan: Extract<KeyPlan, { kind: 'drift-heal' }>,
  ctx: KeyRunContext,
): Promise<KeyOutcome> {
  // Drift healed by a rotation now: the dead value guards nothing, so neither does the
  // minimum interval (consumers of a dead active slot are already failing).
  const outcome = await rotateKey(
    {
      key,
      destinations: plan.resolved.destinations,
      fallbacks: plan.resolved.fallbacks,
      trigger: { ...ctx.trigger, reason: 'drift', force: true },
      reasons: [],
      knownState: plan.state,
      ...(plan.slot ? { slot: plan.slot } : {}),
      ...(ctx.signal ? { signal: ctx.signal } : {}),
    },
    ctx.deps,
  );
  // A dead standby still within consumerRefresh is rolled at its turn, later: reported like
  // drift with onDrift: alert, so the daemon probes it again after --retry-failed instead of
  // alerting on every sweep until then.
  if (plan.slot !== undefined && outcome.result === 'skipped' && outcome.detail === 'consumer-refresh')
    return keyOutcome(factsOf(outcome), {
      result: 'failed',
      detail: 'drift-standby',
      step: 'drift',
      errorCode: 'KR_DRIFT_STANDBY_DEAD',
    });
  return outcome;
}

/** A key an automatic run leaves alone for now: in backoff, or quarantined (reminded now and then). */
async function holdBack(
  key: KeyPolicy,
  primary: ResolvedDestination,
  gate: Exclude<AttemptGate, { kind: 'go' }>,
  ctx: KeyRunContext,
): Promise<KeyOutcome> {
  const { audit, deps } = ctx;
  const { streak } = gate;
  const facts = {
    keyId: key.id,
    organizationId: key.organizationId,
    consecutive: streak.consecutive,
    firstAt: streak.firstAt,
    lastErrorCode: streak.last.errorCode,
    lastStep: streak.last.step,
  };
  const skipped = keyOutcome(notStartedFacts(key), { result: 'skipped', detail: gate.kind });
  if (gate.kind === 'backoff') {
    audit.emit('key.skipped', { ...facts, why: 'backoff', nextAttemptAt: gate.until });
    return skipped;
  }
  const reminded = await remindQuarantined(key, primary, deps, audit, streak);
  audit.emit('key.skipped', { ...facts, why: 'quarantined', quarantinedAt: gate.since, reminded });
  return { ...skipped, quarantinedAt: gate.since };
}

/**
 * A key that threw before its rotation began or while the run stopped: an abort of the run (a
 * refused credential on a roll) stops further keys; anything else is this key's preflight failure
 * (its state could not be read), audited and alerted here, and nothing was rolled.
 */
async function keyStopped(key: KeyPolicy, error: unknown, ctx: KeyRunContext): Promise<KeyOutcome> {
  const { audit, deps } = ctx;
  if (error instanceof RunAbortedError) {
    ctx.abortRun(
      error.reason,
      error.reason === 'credential-refused'
        ? `keyroll's API credential (${ctx.credentialDescription}) was refused (401) on a roll: check that it is set, valid and not expired`
        : error.message,
    );
    return keyOutcome(notStartedFacts(key), { result: 'aborted', detail: error.reason });
  }
  const nextAction = 'nothing was rolled; the next run retries';
  audit.emit('key.failed', {
    keyId: key.id,
    organizationId: key.organizationId,
    step: 'preflight',
    errorCode: errorCode(error),
    error: errorMessage(error),
    nextAction,
  });
  await deps.alerter.send(
    {
      severity: 'error',
      summary: `keyroll could not read the state of key ${key.id}: ${errorMessage(error)}`,
      keyId: key.id,
      organizationId: key.organizationId,
      rotationId: ctx.runId,
      step: 'preflight',
      ...typedCode(error),
      nextAction,
    },
    key.notify.onFailure.length > 0 ? key.notify.onFailure : undefined,
  );
  return keyOutcome(notStartedFacts(key), {
    result: 'failed',
    detail: errorMessage(error),
    step: 'preflight',
    errorCode: catalogueCode(error),
  });
}
