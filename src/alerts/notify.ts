// Success notifications: after a finished rotation, the key's `notify.onSuccess` sinks hear
// which key was rotated, where it was stored and at which version (never the secret). A lost
// notification is audited (`notify.failed`) and changes nothing about the rotation.
import type { AuditLog } from '../audit/events.ts';
import { sanitizeValue } from '../audit/sanitize.ts';
import { dispatchOptions, reportResult, type AlerterOptions } from './alerter.ts';
import { dispatchToSink } from './dispatch.ts';
import { buildSuccessRequest } from './sinks.ts';
import type { SuccessNotice } from './types.ts';

/** The alerter's options, less the default sinks: a success is told only to the sinks the key names. */
export type NotifierOptions = Omit<AlerterOptions, 'defaultSinks'>;

export interface Notifier {
  /** Tells `sinks` (webhook or Slack sinks) about a finished rotation. Never throws. */
  notifySuccess(notice: SuccessNotice, sinks: readonly string[]): Promise<void>;
  /** The same notifier writing its audit events to `audit`. */
  withAudit(audit: AuditLog): Notifier;
}

export function createNotifier(options: NotifierOptions): Notifier {
  const dispatch = dispatchOptions(options);

  const notifierOn = (auditLog: AuditLog): Notifier => ({
    async notifySuccess(notice: SuccessNotice, sinks: readonly string[]): Promise<void> {
      const safe = sanitizeValue(notice);
      const audit = auditLog.child({ rotationId: safe.rotationId, keyId: safe.keyId, organizationId: safe.organizationId });
      await Promise.all(
        [...new Set(sinks)].map(async (sink) => {
          const outcome = await dispatchToSink(sink, (name, config, context) => buildSuccessRequest(name, config, safe, context), dispatch);
          audit.emit(outcome.sent ? 'notify.sent' : 'notify.failed', outcome.fields);
          reportResult(options.onResult, sink, outcome.sent ? 'sent' : 'failed');
        }),
      );
    },
    withAudit: notifierOn,
  });

  return notifierOn(options.audit);
}
