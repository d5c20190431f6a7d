// Alert deduplication within one process: one rotation pages each sink once (invariant 7 asks
// for an alert per failure, not a storm per failure). A later alert of the same rotation that
// is MORE severe still goes out: "stored in escrow" after "retrying the store" is new news.
import { shownCode } from '../errors.ts';
import type { Alert, AlertSeverity } from './types.ts';

const SEVERITY_RANK: Record<AlertSeverity, number> = { warning: 1, error: 2, critical: 3 };

// Bounded so a daemon running for months does not grow without limit; far more rotations than
// one process alerts on between restarts.
const DEFAULT_LIMIT = 10_000;

/**
 * The identity of an alert for deduplication, or undefined when it has none (no rotation id:
 * such alerts are never suppressed, since nothing ties two of them to the same failure).
 */
export function alertDedupeKey(alert: Alert): string | undefined {
  if (alert.rotationId === undefined) return undefined;
  if (alert.keyId !== undefined) return `key\u0000${alert.keyId}\u0000${alert.rotationId}`;
  return `run\u0000${alert.step}\u0000${alert.rotationId}\u0000${shownCode(alert)}`;
}

export class AlertDeduper {
  readonly #sent = new Map<string, number>();
  readonly #limit: number;

  constructor(limit = DEFAULT_LIMIT) {
    this.#limit = limit;
  }

  /**
   * True when `alert` should go to `sink` (and records that it did); false when this sink already
   * had an alert of the same identity at the same or a higher severity.
   */
  claim(sink: string, alert: Alert): boolean {
    const key = alertDedupeKey(alert);
    if (key === undefined) return true;
    const entry = `${sink}\u0000${key}`;
    const rank = SEVERITY_RANK[alert.severity];
    const previous = this.#sent.get(entry);
    if (previous !== undefined && previous >= rank) return false;
    this.#sent.delete(entry);
    this.#sent.set(entry, rank);
    if (this.#sent.size > this.#limit) {
      const oldest = this.#sent.keys().next().value;
      if (oldest !== undefined) this.#sent.delete(oldest);
    }
    return true;
  }
}
