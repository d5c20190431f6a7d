// The per-key progress view on a terminal: finished keys are printed once and stay (they scroll
// like any output), keys in progress and a counter are redrawn below them in place, a few lines
// of ANSI (cursor up, erase down). On a dumb terminal (TERM=dumb) nothing is redrawn: finished
// keys are appended and that is all.
//
// When it draws: on each audit line and each finished key (the same moments the JSON trail would
// have written a line), and from a spinner timer only while no key may be between its roll answer
// and its store (invariant 2: keyroll does no I/O of its own in that window; the engine emits no
// audit line there). Every frame goes through the sanitizer before it is written (invariant 3),
// though it holds only what the sanitized trail and the outcomes carry.
import { sanitizeText } from '../../audit/public/sanitize.ts';
import type { KeyOutcome } from '../../rotation/public/types.ts';
import { RunProgress } from './key-progress.ts';
import {
  abortedLine,
  activeLine,
  counterLine,
  createStyle,
  finishedLine,
  type RenderStyle,
} from './render.ts';

/** The part of a TTY stream the view uses (tests pass a fake). */
export interface ViewStream {
  write(text: string): unknown;
  columns?: number;
  rows?: number;
}

export interface ProgressViewOptions {
  keyIds: readonly string[];
  /** `live` redraws in place; `lines` appends finished keys only (TERM=dumb). */
  mode: 'live' | 'lines';
  color: boolean;
  now?: () => number;
  /** Spinner period; 0 turns the timer off (tests). */
  tickMs?: number;
}

export interface ProgressView {
  /** One audit line, as written to the trail (already sanitized). */
  auditLine(line: string): void;
  keyDone(outcome: KeyOutcome): void;
  /** Erases the redrawn part; the finished keys stay on screen. Idempotent. */
  finish(): void;
}

const ESC = '\u001b[';

export function createProgressView(stream: ViewStream, options: ProgressViewOptions): ProgressView {
  const progress = new RunProgress(options.keyIds.length, options.now);
  const style: RenderStyle = createStyle(options.color, options.mode === 'live', options.keyIds);
  const live = options.mode === 'live';
  let drawnRows = 0;
  let frame = 0;
  let finished = false;
  let abortShown = false;
  const pending: string[] = [];
  // A pseudo-terminal may report 0 columns and rows (unknown): 80 by 24 then. Appended lines
  // (TERM=dumb) are never redrawn, so they may wrap and are not cut.
  const width = (): number => (live ? Math.max(20, (stream.columns || 80) - 1) : Number.POSITIVE_INFINITY);

  const region = (): string[] => {
    const w = width();
    const keys = [...progress.active.values()];
    // Keep the redrawn part shorter than the screen: a region that scrolls cannot be erased.
    const room = Math.max(1, (stream.rows || 24) - 3);
    const shown = keys.slice(0, room).map((key) => activeLine(key, frame, style, w));
    if (keys.length > room) shown.push(style.colors.dim(`  … and ${keys.length - room} more in progress`));
    return [...shown, counterLine(progress.counts, keys.length, style, w)];
  };

  const draw = (): void => {
    if (finished) return;
    let out = live && drawnRows > 0 ? `\r${ESC}${drawnRows}A${ESC}J` : '';
    for (const line of pending) out += `${line}\n`;
    pending.length = 0;
    if (live) {
      const lines = region();
      out += lines.map((line) => `${line}\n`).join('');
      drawnRows = lines.length;
    }
    if (out !== '') stream.write(sanitizeText(out));
  };

  const timer =
    live && (options.tickMs ?? 100) > 0
      ? setInterval(() => {
          if (progress.active.size === 0 || progress.anyInRollWindow()) return;
          frame++;
          draw();
        }, options.tickMs ?? 100)
      : undefined;
  // Nothing is drawn before the run's first audit line: the command may print its own lines first.
  timer?.unref();

  return {
    auditLine(line) {
      if (finished || !progress.applyAuditLine(line)) return;
      if (progress.aborted !== undefined && !abortShown) {
        abortShown = true;
        pending.push(abortedLine(progress.aborted, style, width()));
      }
      frame++;
      // A dumb terminal shows finished keys only: nothing to draw for a step.
      if (live || pending.length > 0) draw();
    },
    keyDone(outcome) {
      if (finished) return;
      pending.push(finishedLine(progress.finishKey(outcome), style, width()));
      draw();
    },
    finish() {
      if (finished) return;
      if (timer) clearInterval(timer);
      let out = live && drawnRows > 0 ? `\r${ESC}${drawnRows}A${ESC}J` : '';
      for (const line of pending) out += `${line}\n`;
      pending.length = 0;
      finished = true;
      if (out !== '') stream.write(sanitizeText(out));
    },
  };
}
