// Alerts: one shape for every failure (invariant 7) and every sink.
import type { ErrorCode } from '../error-codes.ts';

export type AlertSeverity = 'critical' | 'error' | 'warning';

export interface Alert {
  severity: AlertSeverity;
  /** One plain sentence an on-call human can act on. Never the secret. */
  summary: string;
  keyId?: string;
  organizationId?: string;
  rotationId?: string;
  /** The rotation step that failed (preflight, lock, intent, roll, store, verify, finish, recovery, run). */
  step: string;
  /**
   * The catalogue code (errors.ts typedCode): KR_UNEXPECTED, with `foreignCode`, for a failure
   * that carried a code from outside keyroll (ECONNRESET, an SDK's error name). Receivers see the
   * foreign code where they see the code (shownCode), as they always did: payloads keep their shape.
   */
  errorCode: ErrorCode;
  foreignCode?: string;
  /** What keyroll does next ("retry next run", "key unusable: next run re-rolls it", ...). */
  nextAction: string;
  details?: Record<string, unknown>;
}

/** Sends alerts to the sinks named by the policy. Never throws: an undeliverable alert is audited. */
export interface Alerter {
  /**
   * Sends `alert` to `sinks` (names from the policy's alert sinks; all default sinks when omitted).
   * Deduplicated per sink and (keyId, rotationId): one rotation alerts each sink once, unless a
   * later alert is more severe. Alerts without a keyId dedupe on (step, rotationId, errorCode).
   */
  send(alert: Alert, sinks?: readonly string[]): Promise<void>;
}

/** What a success notification carries: where the new secret went, never the secret. */
export interface SuccessNotice {
  keyId: string;
  organizationId: string;
  rotationId: string;
  /** ISO-8601 time of the roll answer. */
  rotatedAt: string;
  destinations: { backend: string; path: string; version: string }[];
  /**
   * `stored`: the new value is in every destination and verify has not run yet; sent to the
   * `webhook` consumers of a single key, whose old value died at the roll (invariant 12).
   * `finished`: the rotation ended (verified, recorded).
   */
  stage: NoticeStage;
}

/** How far the rotation a success notice tells of had come when it was sent. */
export type NoticeStage = 'stored' | 'finished';

/** The outcome of one message to one sink, for the `keyroll_alerts_total{sink,result}` metric. */
export type AlertResult = 'sent' | 'failed';

/** What sink modules need besides their config: where references resolve and the clock. */
export interface SinkContext {
  env: NodeJS.ProcessEnv;
  now: () => Date;
}
