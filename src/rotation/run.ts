// One pass over a set of keys (the `run` and `rotate` commands, the daemon's triggers):
// check keyroll's own credential once, decide which keys are due, rotate them with bounded
// concurrency, stop rolling as soon as the credential is refused or shutdown begins, and
// summarise with the exit code the commands return.
import { randomUUID } from 'node:crypto';
import { ApiError } from '../api/public/errors.ts';
import type { AuditLog } from '../audit/public/events.ts';
import type { ErrorCode } from '../error-codes.ts';
import { errorCode, errorMessage } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { backoffDelay } from './backoff.ts';
import { mapWithConcurrency } from './concurrency.ts';
import type { DriftCheckMode } from './key-plan.ts';
import { inKeySpan } from './key-span.ts';
import { runKey, type KeyRunContext } from './run-key.ts';
import type { Runtime } from './runtime.ts';
import type { KeyOutcome, RotationDeps, RunAbortReason, RunTrigger } from './types.ts';

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
  driftCheck?: DriftCheckMode;
  command?: string;
  /**
   * Asked once per key as its own work starts, before any read (the daemon takes its in-process
   * hold here, src/scheduler/launcher.ts): false means another runner in this process took the key
   * over meanwhile, and the key is skipped as `in-flight`.
   */
  mayStart?: (key: KeyPolicy) => boolean;
  /**
   * Told once per key whose own work starts: after `mayStart`, never for a key skipped before it
   * (aborted, in-flight, native). Its `onKeyDone` follows (the daemon's launcher counts the keys
   * in flight between the two, src/scheduler/launcher.ts).
   */
  onKeyStarted?: (keyId: string) => void;
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

export type { RunAbortReason } from './types.ts';

/** The code of each stopped run's alert: a Record, so a new reason without its code fails the type check. */
const RUN_ABORT_CODES: Record<RunAbortReason, ErrorCode> = {
  'credential-refused': 'KR_RUN_CREDENTIAL_REFUSED',
  'credential-unavailable': 'KR_RUN_CREDENTIAL_UNAVAILABLE',
  'api-unreachable': 'KR_RUN_API_UNREACHABLE',
  'lock-contention': 'KR_RUN_LOCK_CONTENTION',
  shutdown: 'KR_RUN_SHUTDOWN',
  'lost-leadership': 'KR_RUN_LOST_LEADERSHIP',
};

export async function runRotations(runtime: Runtime, options: RunOptions): Promise<RunSummary> {
  const runId = randomUUID();
  const { trigger, signal } = options;
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
  const refusal = await checkCredentialWithRetries(runtime, deps.sleep, audit, signal);
  if (refusal) abortRun(refusal.reason, refusal.message);

  const context: KeyRunContext = {
    runId,
    trigger,
    deps,
    audit,
    driftCheck: options.driftCheck ?? 'policy',
    stopped: () => aborted?.reason ?? (signal?.aborted ? stopReason(signal) : undefined),
    resolveKey: (key) => runtime.resolveKey(key),
    credentialDescription: runtime.credentialDescription,
    abortRun,
    ...(signal ? { signal } : {}),
    ...(options.rotationIds ? { rotationIds: options.rotationIds } : {}),
    ...(options.slots ? { slots: options.slots } : {}),
    ...(options.onKeyDone ? { onKeyDone: options.onKeyDone } : {}),
    ...(options.mayStart ? { mayStart: options.mayStart } : {}),
    ...(options.onKeyStarted ? { onKeyStarted: options.onKeyStarted } : {}),
  };
  const outcomes = await mapWithConcurrency(
    options.keys,
    options.concurrency ?? 4,
    inKeySpan(runId, trigger, (key) => runKey(key, context)),
  );
  return summarise({ runId, outcomes, audit, deps, signal, abortRun, aborted: () => aborted });
}

/** Counts the outcomes, reports a run that stopped, and picks the exit code. */
async function summarise(run: {
  runId: string;
  outcomes: KeyOutcome[];
  audit: AuditLog;
  deps: RotationDeps;
  signal: AbortSignal | undefined;
  abortRun: (reason: RunAbortReason, message: string) => void;
  aborted: () => RunSummary['aborted'];
}): Promise<RunSummary> {
  const { runId, outcomes, audit, deps, signal, abortRun } = run;
  const count = (...results: KeyOutcome['result'][]): number =>
    outcomes.filter((o) => results.includes(o.result)).length;
  const rotated = count('rotated', 'recovered');
  const failed = count('failed');
  const skipped = count('skipped', 'busy', 'aborted');
  const busy = count('busy');
  if (!run.aborted() && busy > 0 && busy === outcomes.filter((o) => o.result !== 'skipped').length) {
    abortRun('lock-contention', 'every key in scope was locked by another runner');
  }
  if (!run.aborted() && signal?.aborted && count('aborted') > 0) {
    const why = stopReason(signal);
    abortRun(
      why,
      why === 'lost-leadership'
        ? "this replica stopped leading before every key was handled; the next leader's sweep takes them"
        : 'shutdown before every key was handled',
    );
  }
  const aborted = run.aborted();
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
