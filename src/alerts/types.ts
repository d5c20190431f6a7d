// Alerts: one shape for every failure (invariant 7) and every sink.
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
  errorCode: string;
  /** What keyroll does next ("retry next run", "key unusable: next run re-rolls it", ...). */
  nextAction: string;
  details?: Record<string, unknown>;
}

/** Sends alerts to the sinks named by the policy. Never throws: an undeliverable alert is audited. */
export interface Alerter {
  /**
   * Sends `alert` to `sinks` (names from the policy's alert sinks; all default sinks when omitted).
   * Deduplicated per (keyId, rotationId, step, errorCode): the same failure alerts once.
   */
  send(alert: Alert, sinks?: readonly string[]): Promise<void>;
}
