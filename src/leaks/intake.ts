// The part of a scanner's leak report that does not depend on the scanner: given the leaked value,
// find the key (identify.ts), rotate it with reason leak through the daemon's launcher (its key
// locks, shutdown and generation), prove the leaked value dead (proof.ts), and say what happened
// so the source can close its alert.
//
// A leak is rotated once. A secret pushed to three repos is three GitHub alerts within seconds
// (and a webhook delivery and a reconcile can each bring one), and one roll kills it for all:
// every further roll would kill the value consumers are being refreshed onto and cost a
// redelivery. The backend lock serializes rolls but does not stop a second one (the leak reason
// bypasses the minimum interval), so the intake keeps, per leaked value (by its digest), the leak
// rotations started for it for as long as any alert of that value is being handled: a later
// alert of the value joins that rotation, running or ended, and proves the value dead instead of
// rolling (an alert that read the destinations before the first rotation stored still sees the
// leaked value as current). And every leaked value is probed before a roll: a value the API
// already refuses (401) is proven dead and not rolled (the alert came after its rotation, here
// or in another process).
import { randomUUID } from 'node:crypto';
import type { Alerter } from '../alerts/public/types.ts';
import type { AuditLog } from '../audit/public/events.ts';
import type { Secret } from '../audit/public/secret.ts';
import { errorCode, errorMessage, typedCode } from '../errors.ts';
import type { KeyPolicy, Policy } from '../policy/public/schema.ts';
import type { Runtime } from '../rotation/public/runtime.ts';
import type { KeyOutcome, RunTrigger } from '../rotation/public/types.ts';
import { inSpan } from '../tracing/public/spans.ts';
import { searchLeakedSecret, type LeakMatch } from './identify.ts';
import { needsLeakRotation } from './previous-value.ts';
import { proveLeakDead, type DeathProof } from './proof.ts';

export type LeakSource = 'github' | 'gitguardian';

/** A scanner's alert, as audit lines, alerts and the rotation's actor name it. */
export interface LeakReport {
  source: LeakSource;
  /** e.g. `octo/app#42` for GitHub; becomes the actor `github:octo/app#42`. */
  ref: string;
  /** The alert's page, for people. */
  url?: string;
}

/** One key's share of a leak report. */
export interface LeakKeyResult {
  keyId: string;
  slot?: string;
  which: LeakMatch['which'];
  /** What happened to the key: rotated (or recovered), the rotation's failure, or no rotation needed. */
  result: KeyOutcome['result'] | 'already-dead' | 'alert-only';
  rotationId?: string;
  /** True when this alert joined a leak rotation another alert had started. */
  coalesced: boolean;
  /** The API's answer to the leaked value after the rotation (absent for alert-only keys). */
  proof?: DeathProof;
}

export type LeakVerdict =
  | { kind: 'unmatched' }
  /** Every key is done with: rotated (or already dead) and the leaked value refused by the API. */
  | { kind: 'closed'; keys: LeakKeyResult[] }
  /** Something is still open: a key only alerted about, a failed rotation, a value not proven dead. */
  | { kind: 'open'; keys: LeakKeyResult[] };

/**
 * The port through which the intake rotates one key now (the daemon: its launcher, which waits for a
 * busy key) and hears its outcome. A rejection (no outcome) is reported as the key's failure at
 * step `rotate`, like any throw of the rotation.
 */
export type LeakRotator = (
  key: KeyPolicy,
  slot: string | undefined,
  trigger: RunTrigger,
  rotationId: string,
  /** Asked again after waiting for a busy key: false (the value died meanwhile) rolls nothing. */
  stillNeeded: () => Promise<boolean>,
) => Promise<KeyOutcome>;

export interface LeakIntakeOptions {
  policy: () => Policy;
  runtime: () => Pick<Runtime, 'resolveKey' | 'api'>;
  alerter: () => Alerter;
  audit: () => AuditLog;
  /** Rotates one key now and resolves with its outcome (LeakRotator). */
  rotate: LeakRotator;
  /**
   * A leaked value this report's own rotation killed, proven dead `ms` after the report arrived
   * (keyroll_leak_time_to_dead_seconds). Not called for a value found dead already, nor for an
   * alert that joined another alert's rotation (that one reports it).
   */
  onProvenDead?: (ms: number) => void;
}

interface SharedRotation {
  rotationId: string;
  outcome: Promise<KeyOutcome>;
}

/** One leaked value while alerts of it are being handled in this process. */
interface ValueHandling {
  /** Alerts of the value being handled now; the record is dropped when the last one ends. */
  alerts: number;
  /** Leak rotations started for the value, by rotation target (entry id and slot), running or ended. */
  rotations: Map<string, SharedRotation>;
}

export class LeakIntake {
  readonly #options: LeakIntakeOptions;
  /**
   * Leaked values being handled, by the value's SHA-256 digest (kept in memory only, as
   * identify.ts compares it). Bounded by the alerts being handled, which the intake queue bounds.
   */
  readonly #values = new Map<string, ValueHandling>();

  constructor(options: LeakIntakeOptions) {
    this.#options = options;
  }

  /** Number of leaked values whose alerts are being handled (tests, shutdown reporting). */
  get inFlight(): number {
    return this.#values.size;
  }

  /**
   * Never throws: every failure is audited and alerted, and the verdict says the alert stays open.
   * One trace when tracing is on (docs/tracing.md): the search for the key, its rotation (the
   * launcher's run joins this span) and the proof that the leaked value is dead.
   */
  handleLeak(report: LeakReport, leaked: Secret): Promise<LeakVerdict> {
    return inSpan(
      'keyroll leak report',
      { 'keyroll.command': 'daemon', 'keyroll.leak.source': report.source, 'keyroll.reason': 'leak' },
      async (span) => {
        const verdict = await this.#handleLeak(report, leaked);
        span.setAttributes({
          'keyroll.leak.verdict': verdict.kind,
          'keyroll.keys': verdict.kind === 'unmatched' ? 0 : verdict.keys.length,
        });
        if (verdict.kind === 'open') span.fail('KR_LEAK_OPEN');
        return verdict;
      },
      'new-trace',
    );
  }

  async #handleLeak(report: LeakReport, leaked: Secret): Promise<LeakVerdict> {
    // Entered before the search: an alert that reads the destinations while another alert of the
    // value rotates finds that rotation here when it decides, however late.
    const digest = leaked.digest();
    const value = this.#values.get(digest) ?? { alerts: 0, rotations: new Map<string, SharedRotation>() };
    value.alerts += 1;
    this.#values.set(digest, value);
    try {
      return await this.#handleValue(report, leaked, value);
    } finally {
      value.alerts -= 1;
      if (value.alerts === 0 && this.#values.get(digest) === value) this.#values.delete(digest);
    }
  }

  async #handleValue(report: LeakReport, leaked: Secret, value: ValueHandling): Promise<LeakVerdict> {
    const receivedAt = performance.now();
    const audit = this.#options.audit().child({ actor: actorOf(report), reason: 'leak' });
    const alertFields = {
      source: report.source,
      alert: report.ref,
      ...(report.url === undefined ? {} : { alertUrl: report.url }),
    };
    const fingerprint = leaked.fingerprint();
    const policy = this.#options.policy();
    let matches: LeakMatch[];
    try {
      const search = await searchLeakedSecret(policy, this.#options.runtime(), leaked);
      matches = search.matches;
      if (matches.length === 0) {
        audit.emit('leak.unmatched', {
          ...alertFields,
          fingerprint,
          searched: search.searched,
          unread: search.unread,
        });
        // Invariant 7: a destination nobody could read may hold the value: a person must look.
        if (search.unread.length > 0) {
          const places = search.unread.map((u) => `${u.backend}:${u.path} (${u.errorCode})`).join(', ');
          await this.#failed(
            audit,
            report,
            'identify',
            new Error(`no readable destination holds the leaked value, but ${places} could not be read`),
            undefined,
          );
          return { kind: 'open', keys: [] };
        }
        return { kind: 'unmatched' };
      }
    } catch (error) {
      await this.#failed(audit, report, 'identify', error, undefined);
      return { kind: 'open', keys: [] };
    }
    const alertOnly = new Set(policy.intake?.alertOnly ?? []);
    const keys = await Promise.all(
      matches.map(async (match): Promise<LeakKeyResult> => {
        const { key, slot, which, destination } = match;
        const keyAudit = audit.child({ keyId: key.id, organizationId: key.organizationId });
        keyAudit.emit('leak.identified', {
          ...alertFields,
          fingerprint,
          backend: destination.backendName,
          path: destination.target.path,
          which,
          ...(slot === undefined ? {} : { slot }),
        });
        const base = { keyId: key.id, ...(slot === undefined ? {} : { slot }), which, coalesced: false };
        if (alertOnly.has(key.id)) return this.#alertOnly(keyAudit, report, key, base, fingerprint);
        try {
          return await this.#rotateAndProve(report, match, leaked, base, value);
        } catch (error) {
          await this.#failed(keyAudit, report, 'rotate', error, key);
          return { ...base, result: 'failed' };
        }
      }),
    );
    for (const key of keys) {
      if (
        key.proof === 'refused' &&
        !key.coalesced &&
        (key.result === 'rotated' || key.result === 'recovered')
      )
        this.#options.onProvenDead?.(performance.now() - receivedAt);
    }
    const closed = keys.every(
      (key) =>
        (key.result === 'rotated' || key.result === 'recovered' || key.result === 'already-dead') &&
        key.proof === 'refused',
    );
    return { kind: closed ? 'closed' : 'open', keys };
  }

  async #rotateAndProve(
    report: LeakReport,
    match: LeakMatch,
    leaked: Secret,
    base: Omit<LeakKeyResult, 'result'>,
    value: ValueHandling,
  ): Promise<LeakKeyResult> {
    const { key, slot } = match;
    const runtime = this.#options.runtime();
    const audit = this.#options.audit().child({ actor: actorOf(report), reason: 'leak' });
    const target = `${key.id}\n${slot ?? ''}`;
    let shared = value.rotations.get(target);
    if (shared === undefined) {
      // The same question `keyroll rotate --leaked-secret-stdin` asks (previous-value.ts): a value
      // the API already refuses is proven dead (recorded) and not rolled again.
      if (!(await needsLeakRotation(runtime, match, leaked))) {
        const proof = await proveLeakDead(runtime, audit, this.#options.alerter(), {
          key,
          leaked,
          ...(slot === undefined ? {} : { slot }),
        });
        if (proof.verdict === 'refused') return { ...base, result: 'already-dead', proof: 'refused' };
      }
      // Another alert of the value may have started the rotation while this one probed.
      shared = value.rotations.get(target);
    }
    const coalesced = shared !== undefined;
    if (shared === undefined) {
      const rotationId = randomUUID();
      const trigger: RunTrigger = {
        reason: 'leak',
        force: true,
        actor: actorOf(report),
        ...(report.url === undefined ? {} : { ticket: report.url.slice(0, 200) }),
      };
      const stillNeeded = (): Promise<boolean> => needsLeakRotation(runtime, match, leaked);
      shared = { rotationId, outcome: this.#options.rotate(key, slot, trigger, rotationId, stillNeeded) };
      value.rotations.set(target, shared);
    } else {
      audit
        .child({ keyId: key.id, organizationId: key.organizationId, rotationId: shared.rotationId })
        .emit('leak.intake.coalesced', {
          source: report.source,
          alert: report.ref,
          ...(slot === undefined ? {} : { slot }),
        });
    }
    const outcome = await shared.outcome;
    if (outcome.result === 'aborted' && outcome.detail === 'shutdown' && outcome.rolls === 0) {
      // Shutdown came before the roll: the value was never meant to be dead yet, so no proof and
      // no KR_LEAK_STILL_ALIVE. The alert stays open, unanswered, for a reconcile to take.
      audit
        .child({ keyId: key.id, organizationId: key.organizationId, rotationId: shared.rotationId })
        .emit('leak.intake.handed_back', {
          source: report.source,
          alert: report.ref,
          why: 'shutdown',
          ...(slot === undefined ? {} : { slot }),
        });
      return { ...base, result: 'aborted', rotationId: shared.rotationId, coalesced };
    }
    const proof = await proveLeakDead(runtime, audit, this.#options.alerter(), {
      key,
      leaked,
      ...(slot === undefined ? {} : { slot }),
      rotationId: shared.rotationId,
      rotation: outcome.result,
    });
    // The rotation this leak waited for killed the value: no roll, like a value found dead before.
    const needless = outcome.result === 'skipped' && outcome.detail === 'already-dead';
    return {
      ...base,
      result: needless ? 'already-dead' : outcome.result,
      rotationId: shared.rotationId,
      coalesced,
      proof: proof.verdict,
    };
  }

  async #alertOnly(
    audit: AuditLog,
    report: LeakReport,
    key: KeyPolicy,
    base: Omit<LeakKeyResult, 'result'>,
    fingerprint: string,
  ): Promise<LeakKeyResult> {
    audit.emit('leak.intake.alert_only', {
      source: report.source,
      alert: report.ref,
      fingerprint,
      ...(base.slot === undefined ? {} : { slot: base.slot }),
    });
    await this.#options.alerter().send(
      {
        severity: 'critical',
        summary: `${report.source} reports a leak of key ${base.slot ?? key.id} (${key.organizationId}, fingerprint ${fingerprint}) in ${report.ref}; the policy lists it under intake.alertOnly, so keyroll did not rotate it`,
        keyId: key.id,
        organizationId: key.organizationId,
        step: 'leak-intake',
        errorCode: 'KR_LEAK_ALERT_ONLY',
        nextAction: `rotate it when its consumers allow: keyroll rotate --key ${base.slot ?? key.id} --reason leak${report.url === undefined ? '' : `, then close ${report.url}`}`,
        details: { source: report.source, alert: report.ref, fingerprint },
      },
      key.notify.onFailure,
    );
    return { ...base, result: 'alert-only' };
  }

  async #failed(
    audit: AuditLog,
    report: LeakReport,
    step: string,
    error: unknown,
    key: KeyPolicy | undefined,
  ): Promise<void> {
    await reportIntakeFailure(audit, this.#options.alerter(), {
      report,
      step,
      error,
      ...(key === undefined ? {} : { key }),
    });
  }
}

export function actorOf(report: LeakReport): string {
  return `${report.source}:${report.ref}`;
}

export interface IntakeFailure {
  report: LeakReport;
  /** identify, rotate, fetch-alert, resolve-alert, ... */
  step: string;
  error: unknown;
  key?: KeyPolicy;
  nextAction?: string;
}

/** `leak.intake.failed` and an error alert: a leak report keyroll could not carry through is a person's job now. */
export async function reportIntakeFailure(
  audit: AuditLog,
  alerter: Alerter,
  failure: IntakeFailure,
): Promise<void> {
  const { report, step, error, key } = failure;
  const nextAction =
    failure.nextAction ??
    `finish by hand: pipe the leaked value to keyroll rotate --leaked-secret-stdin --reason leak${report.url === undefined ? '' : `, then close ${report.url}`}`;
  audit.emit('leak.intake.failed', {
    source: report.source,
    alert: report.ref,
    step,
    errorCode: errorCode(error),
    error: errorMessage(error),
    nextAction,
    ...(key === undefined ? {} : { keyId: key.id }),
  });
  await alerter.send(
    {
      severity: 'error',
      summary: `keyroll could not handle the ${report.source} leak alert ${report.ref} at ${step}: ${errorMessage(error)}`,
      ...(key === undefined ? {} : { keyId: key.id, organizationId: key.organizationId }),
      step: 'leak-intake',
      ...typedCode(error),
      nextAction,
      details: { source: report.source, alert: report.ref, intakeStep: step },
    },
    key?.notify.onFailure,
  );
}
