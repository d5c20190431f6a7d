// One pass over a set of keys (the `run` and `rotate` commands, the daemon's triggers):
// check keyroll's own credential once, decide which keys are due, rotate them with bounded
// concurrency, stop rolling as soon as the credential is refused or shutdown begins, and
// summarise with the exit code the commands return.
import { randomUUID } from 'node:crypto';
import { ApiError } from '../api/errors.ts';
import type { ErrorCode } from '../error-codes.ts';
import { errorCode, errorMessage } from '../errors.ts';
import { decideDue, type DueReason } from '../policy/due.ts';
import type { KeyPolicy } from '../policy/schema.ts';
import type { AuditLog } from '../audit/events.ts';
import { backoffDelay } from './backoff.ts';
import { automaticAttemptGate, type AttemptGate } from './backoff-state.ts';
import { remindQuarantined } from './quarantine.ts';
import { mapWithConcurrency } from './concurrency.ts';
import { RunAbortedError } from './errors.ts';
import type { KeyState } from '../backends/types.ts';
import { driftCheckDue, probeForDrift, type DriftReport } from './drift.ts';
import { auditDoubts, readTrustedState } from './trusted-state.ts';
import { inKeySpan } from './key-span.ts';
import { rotateKey } from './rotate-key.ts';
import type { Runtime } from './runtime.ts';
import type { KeyOutcome, ResolvedDestination, RotationDeps, RunTrigger } from './types.ts';

export interface RunOptions {
  keys: readonly KeyPolicy[];
  trigger: RunTrigger;
  concurrency?: number;
  /** Shutdown: keys not yet started are reported aborted; in-flight ones finish their store. */
  signal?: AbortSignal;
  onKeyDone?: (outcome: KeyOutcome) => void;
  /** A single key's new value is stored, before verify (RotationDeps.onStored; invariant 12). Must not block. */
  onKeyStored?: (outcome: KeyOutcome) => void;
  /** Pre-assigned rotation ids by key id (the daemon's trigger answers with them at once). */
  rotationIds?: ReadonlyMap<string, string>;
  /** Two-slot entries named by a slot (`rotate --key <slot>`): entry id → the slot to roll. */
  slots?: ReadonlyMap<string, string>;
  /**
   * Drift probes of keys that are not due: `policy` (default for scheduled runs) probes a key
   * whose last probe is older than its `driftCheck`; `every-run` (the daemon's sweep) probes
   * every key each time; `off` never. Forced and on-demand runs rotate and never probe.
   */
  driftCheck?: 'policy' | 'every-run' | 'off';
  command?: string;
  /**
   * Asked once per key as its own work starts, before any read (the daemon takes its in-process
   * hold here, src/scheduler/launcher.ts): false means another runner in this process took the key
   * over meanwhile, and the key is skipped as `in-flight`.
   */
  mayStart?: (key: KeyPolicy) => boolean;
}

export interface RunSummary {
  runId: string;
  outcomes: KeyOutcome[];
  rotated: number;
  failed: number;
  skipped: number;
  aborted?: { reason: RunAbortReason; message: string };
  exitCode: 0 | 1 | 3;
}

/** Why a run stopped before finishing (docs/exit-codes.md, exit 3; `run.aborted`'s `why`). */
export type RunAbortReason =
  | 'credential-refused'
  | 'credential-unavailable'
  | 'api-unreachable'
  | 'lock-contention'
  | 'shutdown'
  | 'lost-leadership';

/** The code of each stopped run's alert: a Record, so a new reason without its code fails the type check. */
const RUN_ABORT_CODES: Record<RunAbortReason, ErrorCode> = {
  'credential-refused': 'KR_RUN_CREDENTIAL_REFUSED',
  'credential-unavailable': 'KR_RUN_CREDENTIAL_UNAVAILABLE',
  'api-unreachable': 'KR_RUN_API_UNREACHABLE',
  'lock-contention': 'KR_RUN_LOCK_CONTENTION',
  shutdown: 'KR_RUN_SHUTDOWN',
  'lost-leadership': 'KR_RUN_LOST_LEADERSHIP',
};

// eslint-disable-next-line max-lines-per-function -- restructured in issue 29 §2/§4
export async function runRotations(runtime: Runtime, options: RunOptions): Promise<RunSummary> {
  const runId = randomUUID();
  const { trigger } = options;
  const audit = runtime.audit.child({
    runId,
    ...(trigger.reason === 'scheduled' ? {} : { reason: trigger.reason }),
    ...(trigger.actor ? { actor: trigger.actor } : {}),
    ...(trigger.ticket ? { ticket: trigger.ticket } : {}),
  });
  const deps: RotationDeps = {
    ...runtime.rotationDeps(audit),
    ...(options.onKeyStored ? { onStored: options.onKeyStored } : {}),
  };
  audit.emit('run.started', {
    command: options.command ?? 'run',
    keys: options.keys.length,
    force: trigger.force,
  });

  let aborted: RunSummary['aborted'];
  const abortRun = (reason: RunAbortReason, message: string): void => {
    aborted ??= { reason, message };
  };
  const refusal = await checkCredentialWithRetries(runtime, deps.sleep, audit, options.signal);
  if (refusal) abortRun(refusal.reason, refusal.message);

  const outcomes = await mapWithConcurrency(
    options.keys,
    options.concurrency ?? 4,
    // eslint-disable-next-line max-lines-per-function -- restructured in issue 29 §2/§4
    inKeySpan(runId, trigger, async (key): Promise<KeyOutcome> => {
      const skippedAs = (result: KeyOutcome['result'], detail: string): KeyOutcome => ({
        keyId: key.id,
        organizationId: key.organizationId,
        result,
        detail,
        durationMs: 0,
        rolls: 0,
      });
      if (aborted || options.signal?.aborted) {
        // The audit trail is the record in non-terminal runs: it names every key left unrotated.
        const why = aborted?.reason ?? stopReason(options.signal);
        audit.emit('key.skipped', {
          keyId: key.id,
          organizationId: key.organizationId,
          why: 'aborted',
          abortReason: why,
        });
        const skipped = skippedAs('aborted', why);
        options.onKeyDone?.(skipped);
        return skipped;
      }
      if (options.mayStart?.(key) === false) {
        audit.emit('key.skipped', { keyId: key.id, organizationId: key.organizationId, why: 'in-flight' });
        const skipped = skippedAs('skipped', 'in-flight');
        options.onKeyDone?.(skipped);
        return skipped;
      }
      // One scheduler per secret: Secrets Manager starts this key's scheduled rotations (src/lambda/).
      if (key.scheduler === 'aws-native' && (trigger.reason === 'scheduled' || trigger.reason === 'drift')) {
        audit.emit('key.skipped', { keyId: key.id, organizationId: key.organizationId, why: 'aws-native' });
        const skipped = skippedAs('skipped', 'aws-native');
        options.onKeyDone?.(skipped);
        return skipped;
      }
      let outcome: KeyOutcome;
      try {
        const { destinations, fallbacks } = runtime.resolveKey(key);
        const primary = destinations[0];
        if (!primary) throw new Error(`key ${key.id} has no destination`);
        let reasons: DueReason[] | undefined = trigger.force || trigger.ignoreSchedule ? [] : undefined;
        let knownState: KeyState | undefined;
        if (!reasons) {
          const state = await readTrustedState(primary, key, deps.now());
          auditDoubts(audit, state, { keyId: key.id, organizationId: key.organizationId });
          // Automatic attempts of a key in a failure streak wait out its backoff, and stop once it is
          // quarantined; a key with an intent marker is always let through (invariant 6).
          const gate = automaticAttemptGate(state, deps.now());
          if (gate.kind !== 'go') {
            outcome = await holdBack(key, primary, gate, deps, audit);
            options.onKeyDone?.(outcome);
            return outcome;
          }
          const decision = decideDue(
            key,
            {
              ...(state.lastRotatedAt ? { lastRotatedAt: state.lastRotatedAt } : {}),
              ...(state.intent ? { intent: state.intent } : {}),
            },
            deps.now(),
          );
          if (!decision.due) {
            const drift = await checkDriftIfDue(
              key,
              destinations,
              state,
              options.driftCheck ?? 'policy',
              deps,
            );
            const heal = drift === undefined ? undefined : driftHeal(key, drift);
            if (heal === undefined) {
              audit.emit('key.skipped', {
                keyId: key.id,
                organizationId: key.organizationId,
                why: 'not-due',
                lastRotatedAt: state.lastRotatedAt,
                nextRunAt: decision.nextRunAt?.toISOString(),
              });
              const dead =
                drift?.stored === 'dead'
                  ? 'KR_DRIFT_DETECTED'
                  : drift?.standby?.verdict === 'dead'
                    ? 'KR_DRIFT_STANDBY_DEAD'
                    : undefined;
              outcome =
                dead === undefined
                  ? skippedAs('skipped', 'not-due')
                  : {
                      ...skippedAs('failed', dead === 'KR_DRIFT_DETECTED' ? 'drift' : 'drift-standby'),
                      step: 'drift',
                      errorCode: dead,
                    };
              options.onKeyDone?.(outcome);
              return outcome;
            }
            // Drift healed by a rotation now: the dead value guards nothing, so neither does the
            // minimum interval (consumers of a dead active slot are already failing).
            outcome = await rotateKey(
              {
                key,
                destinations,
                fallbacks,
                trigger: { ...trigger, reason: 'drift', force: true },
                reasons: [],
                knownState: state,
                ...(heal.slot ? { slot: heal.slot } : {}),
                ...(options.signal ? { signal: options.signal } : {}),
              },
              deps,
            );
            // A dead standby still within consumerRefresh is rolled at its turn, later: reported like
            // drift with onDrift: alert, so the daemon probes it again after --retry-failed instead of
            // alerting on every sweep until then.
            if (
              heal.slot !== undefined &&
              outcome.result === 'skipped' &&
              outcome.detail === 'consumer-refresh'
            )
              outcome = {
                ...outcome,
                result: 'failed',
                detail: 'drift-standby',
                step: 'drift',
                errorCode: 'KR_DRIFT_STANDBY_DEAD',
              };
            options.onKeyDone?.(outcome);
            return outcome;
          }
          reasons = decision.reasons;
          knownState = state;
        }
        const rotationId = options.rotationIds?.get(key.id);
        const slot = options.slots?.get(key.id);
        outcome = await rotateKey(
          {
            key,
            destinations,
            fallbacks,
            trigger,
            reasons,
            ...(knownState ? { knownState } : {}),
            ...(slot ? { slot } : {}),
            ...(options.signal ? { signal: options.signal } : {}),
            ...(rotationId ? { rotationId } : {}),
          },
          deps,
        );
      } catch (error) {
        if (error instanceof RunAbortedError) {
          abortRun(
            error.reason,
            error.reason === 'credential-refused'
              ? `keyroll's API credential (${runtime.credentialDescription}) was refused (401) on a roll: check that it is set, valid and not expired`
              : error.message,
          );
          outcome = skippedAs('aborted', error.reason);
        } else {
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
              rotationId: runId,
              step: 'preflight',
              errorCode: errorCode(error),
              nextAction,
            },
            key.notify.onFailure.length > 0 ? key.notify.onFailure : undefined,
          );
          outcome = {
            ...skippedAs('failed', errorMessage(error)),
            step: 'preflight',
            errorCode: errorCode(error),
          };
        }
      }
      options.onKeyDone?.(outcome);
      return outcome;
    }),
  );

  const count = (...results: KeyOutcome['result'][]): number =>
    outcomes.filter((o) => results.includes(o.result)).length;
  const rotated = count('rotated', 'recovered');
  const failed = count('failed');
  const skipped = count('skipped', 'busy', 'aborted');
  const busy = count('busy');
  if (!aborted && busy > 0 && busy === outcomes.filter((o) => o.result !== 'skipped').length) {
    abortRun('lock-contention', 'every key in scope was locked by another runner');
  }
  if (!aborted && options.signal?.aborted && count('aborted') > 0) {
    const why = stopReason(options.signal);
    abortRun(
      why,
      why === 'lost-leadership'
        ? "this replica stopped leading before every key was handled; the next leader's sweep takes them"
        : 'shutdown before every key was handled',
    );
  }
  const exitCode = aborted ? 3 : failed > 0 ? 1 : 0;
  if (aborted) {
    audit.emit('run.aborted', { why: aborted.reason, message: aborted.message });
    await deps.alerter.send({
      severity:
        aborted.reason === 'shutdown' ||
        aborted.reason === 'lost-leadership' ||
        aborted.reason === 'lock-contention'
          ? 'warning'
          : 'critical',
      summary: `keyroll run aborted: ${aborted.message}`,
      rotationId: runId,
      step: 'run',
      errorCode: RUN_ABORT_CODES[aborted.reason],
      nextAction:
        aborted.reason === 'credential-refused'
          ? "no key was rolled after the refusal; fix keyroll's credential and re-run"
          : 'the next run handles the remaining keys',
    });
  }
  audit.emit('run.finished', { rotated, failed, skipped, exitCode });
  return { runId, outcomes, rotated, failed, skipped, ...(aborted ? { aborted } : {}), exitCode };
}

/** A key an automatic run leaves alone for now: in backoff, or quarantined (reminded now and then). */
async function holdBack(
  key: KeyPolicy,
  primary: ResolvedDestination,
  gate: Exclude<AttemptGate, { kind: 'go' }>,
  deps: RotationDeps,
  audit: AuditLog,
): Promise<KeyOutcome> {
  const { streak } = gate;
  const facts = {
    keyId: key.id,
    organizationId: key.organizationId,
    consecutive: streak.consecutive,
    firstAt: streak.firstAt,
    lastErrorCode: streak.last.errorCode,
    lastStep: streak.last.step,
  };
  const skipped = {
    keyId: key.id,
    organizationId: key.organizationId,
    result: 'skipped' as const,
    detail: gate.kind,
    durationMs: 0,
    rolls: 0,
  };
  if (gate.kind === 'backoff') {
    audit.emit('key.skipped', { ...facts, why: 'backoff', nextAttemptAt: gate.until });
    return skipped;
  }
  const reminded = await remindQuarantined(key, primary, deps, audit, streak);
  audit.emit('key.skipped', { ...facts, why: 'quarantined', quarantinedAt: gate.since, reminded });
  return { ...skipped, quarantinedAt: gate.since };
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
  destinations: ResolvedDestination[],
  state: KeyState,
  mode: NonNullable<RunOptions['driftCheck']>,
  deps: RotationDeps,
): Promise<DriftReport | undefined> {
  if (mode === 'off') return undefined;
  // A marker keyroll could not read at all is probed for at once: recovery would start there.
  const markerUnread =
    state.doubts?.some((doubt) => doubt.record === 'intent' && doubt.action === 'ignored') === true;
  if (mode === 'policy' && !markerUnread && !driftCheckDue(key, state, deps.now())) return undefined;
  if (mode === 'every-run' && !state.exists) return undefined;
  // The state the run just read names the active slot for the alert's advice; no second read.
  return probeForDrift(key, destinations, deps, state);
}

const CREDENTIAL_CHECK_ATTEMPTS = 3;

/**
 * Invariant 1 for keyroll's own credential: one cheap authenticated call before any roll. A 401
 * or an unobtainable credential (unreadable reference, OAuth client refused) stops the run; a
 * transient failure is retried; a 402/403 on listing does not prove the principal cannot roll,
 * so it is audited and each key's roll answer decides.
 */
async function checkCredentialWithRetries(
  runtime: Runtime,
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>,
  audit: AuditLog,
  signal: AbortSignal | undefined,
): Promise<{ reason: RunAbortReason; message: string } | undefined> {
  for (let attempt = 1; ; attempt++) {
    try {
      await runtime.checkApiCredential();
      return undefined;
    } catch (error) {
      if (error instanceof ApiError && error.status === 401) {
        return {
          reason: 'credential-refused',
          message: `keyroll's API credential (${runtime.credentialDescription}) was refused (401): check that it is set, valid and not expired`,
        };
      }
      if (error instanceof ApiError && (error.status === 402 || error.status === 403)) {
        audit.emit('run.credential.limited', { errorCode: error.code });
        return undefined;
      }
      if (!(error instanceof ApiError) || !error.retryable) {
        return {
          reason: 'credential-unavailable',
          message: `keyroll's API credential (${runtime.credentialDescription}) could not be used: ${errorMessage(error)}`,
        };
      }
      if (attempt >= CREDENTIAL_CHECK_ATTEMPTS) {
        return {
          reason: 'api-unreachable',
          message: `the API did not answer the credential check after ${attempt} attempts: ${errorMessage(error)}`,
        };
      }
      try {
        await sleep(backoffDelay({ initialMs: 1_000, maxMs: 5_000 }, attempt), signal);
      } catch {
        return { reason: 'shutdown', message: 'shutdown during the credential check' };
      }
    }
  }
}

/**
 * Why the run's signal stopped it from starting keys: the daemon's shutdown, or (a daemon replica
 * whose Lease term ended, src/leader/) the loss of leadership, which aborts with KR_LEADER_LOST.
 */
function stopReason(signal: AbortSignal | undefined): 'shutdown' | 'lost-leadership' {
  return errorCode(signal?.reason) === 'KR_LEADER_LOST' ? 'lost-leadership' : 'shutdown';
}
