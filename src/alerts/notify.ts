// Success notifications: after a finished rotation (or, for a single key's webhook consumers,
// right after its store: `stage`), webhook sinks hear which key was rotated, where it was stored
// and at which version (never the secret). src/consumers/ sends them, to a
// key's `notify.onSuccess` sinks and its `webhook` consumers. A lost notification is audited
// (`notify.failed`), reported to the caller, and changes nothing about the rotation.
import type { AuditLog } from '../audit/public/events.ts';
import type { ErrorCode } from '../error-codes.ts';
import { sanitizeValue } from '../audit/public/sanitize.ts';
import { dispatchOptions, reportResult, type AlerterOptions } from './alerter.ts';
import { dispatchToSink } from './dispatch.ts';
import { buildSuccessRequest } from './sinks.ts';
import type { SuccessNotice } from './types.ts';

/** The alerter's options, less the default sinks: a success is told only to the sinks the key names. */
export type NotifierOptions = Omit<AlerterOptions, 'defaultSinks'>;

/** How one notice went to one sink. */
export interface NoticeResult {
  sink: string;
  sent: boolean;
  /** On failure: the catalogue code (and the foreign code it stands for, errors.ts typedCode) and a plain sentence (never the secret). */
  errorCode?: ErrorCode;
  foreignCode?: string;
  error?: string;
}

export interface Notifier {
  /** Tells `sinks` (webhook or Slack sinks) about a stored value or a finished rotation, once per sink. Never throws. */
  notifySuccess(notice: SuccessNotice, sinks: readonly string[]): Promise<NoticeResult[]>;
  /** The same notifier writing its audit events to `audit`. */
  withAudit(audit: AuditLog): Notifier;
}

export function createNotifier(options: NotifierOptions): Notifier {
  const dispatch = dispatchOptions(options);

  const notifierOn = (auditLog: AuditLog): Notifier => ({
    async notifySuccess(notice: SuccessNotice, sinks: readonly string[]): Promise<NoticeResult[]> {
      const safe = sanitizeValue(notice);
      const audit = auditLog.child({
        rotationId: safe.rotationId,
        keyId: safe.keyId,
        organizationId: safe.organizationId,
      });
      return Promise.all(
        [...new Set(sinks)].map(async (sink): Promise<NoticeResult> => {
          const outcome = await dispatchToSink(
            sink,
            (name, config, context) => buildSuccessRequest(name, config, safe, context),
            dispatch,
          );
          audit.emit(outcome.sent ? 'notify.sent' : 'notify.failed', outcome.fields);
          reportResult(options.onResult, sink, outcome.sent ? 'sent' : 'failed');
          if (outcome.sent) return { sink, sent: true };
          return { sink, sent: false, ...outcome.code, error: outcome.error };
        }),
      );
    },
    withAudit: notifierOn,
  });

  return notifierOn(options.audit);
}
