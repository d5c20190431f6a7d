// The state the progress view shows, built from two things the run already produces: the audit
// lines (after pino's redaction and the sanitizer, so the view never sees more than the trail
// does) and the per-key outcomes. Events move a key from step to step; its outcome ends it.
// Nothing here writes: rendering is render.ts's, drawing live-view.ts's.
import type { KeyOutcome, KeyResult } from '../../rotation/public/types.ts';

export interface KeyProgress {
  keyId: string;
  /** The step the key is in now (what it does next, judged from the last event). */
  step: string;
  /** A retry or a wait, shown beside the step. */
  note?: string;
  /** Between the intent marker and the store's audit: the roll, then the write (invariant 2). */
  inRollWindow: boolean;
  /** After a 429 or an unknown outcome, the roll waits until then (epoch ms) before trying again. */
  waitingUntil?: number;
  fingerprint?: string;
  exposureMs?: number;
  startedAt: number;
}

export interface FinishedKey {
  outcome: KeyOutcome;
  fingerprint?: string;
  nextAction?: string;
}

export interface RunCounts {
  total: number;
  done: number;
  results: Map<KeyResult, number>;
  alertsSent: number;
  alertsUndeliverable: number;
}

/** Fields of an audit line the view reads; everything else is ignored. */
interface AuditFields {
  event?: unknown;
  keyId?: unknown;
  step?: unknown;
  attempt?: unknown;
  status?: unknown;
  errorCode?: unknown;
  waitMs?: unknown;
  delayMs?: unknown;
  fingerprint?: unknown;
  exposureMs?: unknown;
  nextAction?: unknown;
  why?: unknown;
  message?: unknown;
}

const str = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
const num = (value: unknown): number | undefined =>
  typeof value === 'number' && Number.isFinite(value) ? value : undefined;

export class RunProgress {
  readonly active = new Map<string, KeyProgress>();
  readonly counts: RunCounts;
  /** A run-level abort, once the trail reports one. */
  aborted?: string;
  private readonly finishedIds = new Set<string>();
  private readonly fingerprints = new Map<string, string>();
  private readonly nextActions = new Map<string, string>();
  private readonly now: () => number;

  constructor(total: number, now: () => number = Date.now) {
    this.now = now;
    this.counts = { total, done: 0, results: new Map(), alertsSent: 0, alertsUndeliverable: 0 };
  }

  /** Takes one audit line (JSON); true when what the view shows changed. */
  applyAuditLine(line: string): boolean {
    let fields: AuditFields;
    try {
      fields = JSON.parse(line) as AuditFields;
    } catch {
      return false;
    }
    return this.applyAuditFields(fields);
  }

  applyAuditFields(fields: AuditFields): boolean {
    const event = str(fields.event);
    if (event === undefined) return false;
    // The first line of a run: the view shows its counter from here on.
    if (event === 'run.started') return true;
    if (event === 'run.aborted') {
      this.aborted = [str(fields.why), str(fields.message)].filter((part) => part !== undefined).join(': ');
      return true;
    }
    if (event === 'alert.sent') this.counts.alertsSent++;
    if (event === 'alert.undeliverable') this.counts.alertsUndeliverable++;
    const keyId = str(fields.keyId);
    if (keyId === undefined || !event.startsWith('key.')) return event.startsWith('alert.');
    // A rolled secret is known by its fingerprint only (the trail's own field).
    const fingerprint = str(fields.fingerprint);
    if (fingerprint !== undefined) this.fingerprints.set(keyId, fingerprint);
    const nextAction = str(fields.nextAction);
    if (event === 'key.failed' && nextAction !== undefined) this.nextActions.set(keyId, nextAction);
    if (this.finishedIds.has(keyId)) return false;
    const key = this.keyFor(keyId);
    applyKeyEvent(key, event, fields, this.now());
    if (fingerprint !== undefined) key.fingerprint = fingerprint;
    return true;
  }

  /** The key's outcome: it leaves the active set. */
  finishKey(outcome: KeyOutcome): FinishedKey {
    this.active.delete(outcome.keyId);
    this.finishedIds.add(outcome.keyId);
    this.counts.done++;
    this.counts.results.set(outcome.result, (this.counts.results.get(outcome.result) ?? 0) + 1);
    const fingerprint = this.fingerprints.get(outcome.keyId);
    const nextAction = this.nextActions.get(outcome.keyId);
    return { outcome, ...(fingerprint ? { fingerprint } : {}), ...(nextAction ? { nextAction } : {}) };
  }

  /**
   * True while some key may be between its roll answer and its store. The view then draws only
   * when an event arrives (the engine emits none in that window), never from its timer, so no
   * terminal write of keyroll's own lands between a roll answer and the write (invariant 2).
   */
  anyInRollWindow(): boolean {
    const now = this.now();
    for (const key of this.active.values()) {
      if (key.inRollWindow && (key.waitingUntil === undefined || now >= key.waitingUntil)) return true;
    }
    return false;
  }

  private keyFor(keyId: string): KeyProgress {
    let key = this.active.get(keyId);
    if (!key) {
      key = { keyId, step: 'preflight', inRollWindow: false, startedAt: this.now() };
      this.active.set(keyId, key);
    }
    return key;
  }
}

/** What each event says about where the key is now. */
function applyKeyEvent(key: KeyProgress, event: string, fields: AuditFields, now: number): void {
  const step = (name: string, note?: string): void => {
    key.step = name;
    if (note === undefined) delete key.note;
    else key.note = note;
  };
  switch (event) {
    case 'key.recovery.started':
      step('recovery', 'a run died mid-rotation; probing');
      break;
    case 'key.probe':
      step(str(fields.step) ?? key.step, 'probing the stored secret');
      break;
    case 'key.preflight.passed':
      step('lock');
      break;
    case 'key.lock.acquired':
      step('intent');
      break;
    case 'key.intent.set':
      step('roll');
      key.inRollWindow = true;
      break;
    case 'key.roll.retry': {
      const waitMs = num(fields.waitMs) ?? 0;
      const why = num(fields.status) ?? str(fields.errorCode) ?? 'retry';
      step(
        'roll',
        `attempt ${String(num(fields.attempt) ?? '?')} after ${String(why)}, waiting ${formatDuration(waitMs)}`,
      );
      key.waitingUntil = now + waitMs;
      break;
    }
    case 'key.store.retry':
      step(
        'store',
        `attempt ${String(num(fields.attempt) ?? '?')} after ${str(fields.errorCode) ?? 'an error'}`,
      );
      break;
    case 'key.stored':
    case 'key.store.fallback':
    case 'key.escrowed':
    case 'key.unusable':
      key.inRollWindow = false;
      delete key.waitingUntil;
      if (num(fields.exposureMs) !== undefined && key.exposureMs === undefined)
        key.exposureMs = num(fields.exposureMs);
      step(
        'verify',
        event === 'key.store.fallback'
          ? 'stored in a fallback'
          : event === 'key.stored'
            ? undefined
            : event.slice(4),
      );
      break;
    case 'key.rolled':
      break;
    case 'key.verified':
      step('finish');
      break;
    case 'key.failed':
      key.inRollWindow = false;
      step(str(fields.step) ?? key.step, `failed: ${str(fields.errorCode) ?? 'error'}`);
      break;
    default:
      break;
  }
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}
