// The alerter: every failed step reaches the policy's alert sinks (invariant 7), retried,
// deduplicated per key rotation, and an alert that cannot be delivered is itself audited.
// `send` never throws: a failing pager must not fail, or hide, the rotation it reports on.
import type { Dispatcher } from 'undici';
import type { AuditContext, AuditLog } from '../audit/public/events.ts';
import { sanitizeValue } from '../audit/public/sanitize.ts';
import { shownCode } from '../errors.ts';
import type { AlertSinkConfig } from './config.ts';
import { AlertDeduper } from './dedupe.ts';
import { DEFAULT_ALERT_RETRY, type RetryPolicy } from './deliver.ts';
import { dispatchToSink, type SinkDispatchOptions } from './dispatch.ts';
import { buildAlertRequest } from './sinks.ts';
import type { Alert, Alerter, AlertResult } from './types.ts';

export interface AlerterOptions {
  /** The policy's `alerts.sinks`. */
  sinks: Record<string, AlertSinkConfig>;
  /** Sinks used when `send` names none; every defined sink when omitted. */
  defaultSinks?: readonly string[];
  audit: AuditLog;
  dispatcher?: Dispatcher;
  retry?: RetryPolicy;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /**
   * Shutdown: once it aborts, each delivery has `shutdownWindowMs` (SHUTDOWN_WINDOW_MS by default)
   * left, then is abandoned and audited as undelivered. The CLI's SIGTERM reaches every alerter
   * without it (./shutdown.ts).
   */
  signal?: AbortSignal;
  shutdownWindowMs?: number;
  /** Called once per sink and alert actually attempted (not for deduplicated ones); for metrics. */
  onResult?: (sink: string, result: AlertResult) => void;
  /** Where `env:` references resolve; process.env by default. */
  env?: NodeJS.ProcessEnv;
  now?: () => Date;
}

export interface AuditedAlerter extends Alerter {
  /** The same alerter (same sinks, same deduplication) writing its audit events to `audit`. */
  withAudit(audit: AuditLog): Alerter;
}

/** Sleeps `ms`, or less when `signal` aborts first: a cut-off backoff leaves no timer keeping the process up. */
export function realSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** Reports a result to the metrics hook; a throwing hook must not break alerting. */
export function reportResult(onResult: AlerterOptions['onResult'], sink: string, result: AlertResult): void {
  try {
    onResult?.(sink, result);
  } catch {
    // The hook is for metrics; losing one count is better than losing the alert's audit line.
  }
}

/** How alerts and success notices reach their sinks: the sinks, retries, clock, dispatcher and shutdown settings of `options`. */
export function dispatchOptions(
  options: Omit<AlerterOptions, 'defaultSinks' | 'audit' | 'onResult'>,
): SinkDispatchOptions {
  return {
    sinks: options.sinks,
    retry: options.retry ?? DEFAULT_ALERT_RETRY,
    sleep: options.sleep ?? realSleep,
    context: { env: options.env ?? process.env, now: options.now ?? (() => new Date()) },
    ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
    ...(options.shutdownWindowMs === undefined ? {} : { shutdownWindowMs: options.shutdownWindowMs }),
  };
}

function alertContext(alert: Alert): AuditContext {
  return {
    ...(alert.rotationId === undefined ? {} : { rotationId: alert.rotationId }),
    ...(alert.keyId === undefined ? {} : { keyId: alert.keyId }),
    ...(alert.organizationId === undefined ? {} : { organizationId: alert.organizationId }),
  };
}

/**
 * Invariant 3: whatever text a caller put in the alert, a known secret does not leave. Details
 * that cannot be serialized (a cycle, a BigInt) are dropped rather than failing the alert.
 */
function sanitizedAlert(alert: Alert): Alert {
  try {
    return sanitizeValue(alert);
  } catch {
    const { details: _dropped, ...rest } = alert;
    return { ...sanitizeValue(rest), details: { note: 'details withheld: they could not be serialized' } };
  }
}

export function createAlerter(options: AlerterOptions): AuditedAlerter {
  const deduper = new AlertDeduper();
  const defaultSinks = options.defaultSinks ?? Object.keys(options.sinks);
  const dispatch = dispatchOptions(options);

  const alerterOn = (auditLog: AuditLog): Alerter => ({
    async send(alert: Alert, sinks?: readonly string[]): Promise<void> {
      const safe = sanitizedAlert(alert);
      const audit = auditLog.child(alertContext(safe));
      const about = { severity: safe.severity, alertStep: safe.step, alertErrorCode: shownCode(safe) };
      const targets = [...new Set(sinks ?? defaultSinks)].filter((sink) => deduper.claim(sink, safe));
      await Promise.all(
        targets.map(async (sink) => {
          const outcome = await dispatchToSink(
            sink,
            (name, config, context) => buildAlertRequest(name, config, safe, context),
            dispatch,
          );
          audit.emit(outcome.sent ? 'alert.sent' : 'alert.undeliverable', { ...outcome.fields, ...about });
          reportResult(options.onResult, sink, outcome.sent ? 'sent' : 'failed');
        }),
      );
    },
  });

  return { ...alerterOn(options.audit), withAudit: alerterOn };
}
