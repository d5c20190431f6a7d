// Refusals of every signed endpoint (the trigger and the leak intake) are audited with one
// budget: anyone who reaches the port can send refused requests, and one audit line each would
// let them flood the audit trail (and whatever ships and stores it). The first `perWindow`
// refusals of each window are audited one by one (`trigger.rejected`, the event name kept from
// when the trigger was the only endpoint); the rest are counted, and one
// `trigger.rejected_suppressed` line per window says how many were left out and why. The metric
// counts every refusal regardless.
import type { AuditLog } from '../audit/public/events.ts';

export const DEFAULT_REJECTIONS_AUDITED_PER_MINUTE = 10;
const WINDOW_MS = 60_000;

export interface Rejection {
  why: string;
  status: number;
  remoteAddress: string;
  /** The caller whose key verified (the trigger). */
  caller?: string;
  details?: unknown;
}

export interface RejectionAuditOptions {
  audit: () => AuditLog;
  /** Audited one by one per window; 0 audits only the summaries. */
  perWindow: number;
  windowMs?: number;
  nowMs: () => number;
  /** Called for every refusal, audited or not (the metric). */
  counted: (why: string) => void;
}

export class RejectionAudit {
  readonly #options: RejectionAuditOptions;
  readonly #windowMs: number;
  #windowStart = Number.NEGATIVE_INFINITY;
  #audited = 0;
  #suppressed = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;

  constructor(options: RejectionAuditOptions) {
    this.#options = options;
    this.#windowMs = options.windowMs ?? WINDOW_MS;
  }

  record(rejection: Rejection): void {
    this.#options.counted(rejection.why);
    const now = this.#options.nowMs();
    if (now - this.#windowStart >= this.#windowMs) {
      this.flush();
      this.#windowStart = now;
      this.#audited = 0;
    }
    if (this.#audited < this.#options.perWindow) {
      this.#audited += 1;
      this.#options.audit().emit('trigger.rejected', { ...rejection });
      return;
    }
    this.#suppressed.set(rejection.why, (this.#suppressed.get(rejection.why) ?? 0) + 1);
    // The summary comes when the window ends, even if the flood stopped: not on the next refusal.
    this.#timer ??= setTimeout(
      () => {
        this.flush();
      },
      Math.max(0, this.#windowStart + this.#windowMs - now),
    ).unref();
  }

  /** Emits the summary of refusals left out so far, if any (window end, and at shutdown). */
  flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#suppressed.size === 0) return;
    const byWhy = Object.fromEntries([...this.#suppressed].sort(([a], [b]) => a.localeCompare(b)));
    const suppressed = [...this.#suppressed.values()].reduce((sum, count) => sum + count, 0);
    this.#suppressed = new Map();
    this.#options.audit().emit('trigger.rejected_suppressed', {
      suppressed,
      byWhy,
      windowStart: new Date(this.#windowStart).toISOString(),
      windowMs: this.#windowMs,
      audited: this.#audited,
    });
  }
}
