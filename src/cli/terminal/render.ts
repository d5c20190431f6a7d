// The progress view's lines, as text: one line per finished key (kept on screen), one per key in
// progress (redrawn), and a counter. Only key ids, steps, results, error codes, destinations,
// exposure windows and fingerprints appear, all read from the sanitized audit trail or the key's
// outcome; control characters are shown as escapes (audit/printable.ts), so nothing printed can
// move the cursor or retitle the terminal. Lines are cut to the terminal's width: a wrapped line would break the redraw.
import picocolors from 'picocolors';
import { printable } from '../../audit/public/printable.ts';
import type { KeyResult } from '../../rotation/public/types.ts';
import { formatDuration, type FinishedKey, type KeyProgress, type RunCounts } from './key-progress.ts';

export type Colors = ReturnType<typeof picocolors.createColors>;

export interface RenderStyle {
  colors: Colors;
  /** Unicode symbols and a spinner; plain words on a dumb terminal. */
  unicode: boolean;
  /** Width the key id column is padded to. */
  keyWidth: number;
}

interface Segment {
  text: string;
  paint?: (text: string) => string;
}

export const SPINNER_FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'] as const;

export function createStyle(color: boolean, unicode: boolean, keyIds: readonly string[]): RenderStyle {
  return {
    colors: picocolors.createColors(color),
    unicode,
    keyWidth: Math.min(32, Math.max(8, ...keyIds.map((id) => id.length))),
  };
}

// Controls, ESC included, become visible escapes before the line is cut: a key id or an error
// message cannot drive the terminal, and the cut counts what is shown.
const characters = (text: string): string[] => Array.from(printable(text));

/** Joins segments, cut to `width` characters (with an ellipsis), painting each visible part. */
export function fitLine(segments: readonly Segment[], width: number): string {
  let room = Math.max(1, width);
  let out = '';
  for (const segment of segments) {
    if (room <= 0) break;
    let chars = characters(segment.text);
    if (chars.length > room) chars = [...chars.slice(0, Math.max(0, room - 1)), '…'];
    room -= chars.length;
    const text = chars.join('');
    out += segment.paint && text !== '' ? segment.paint(text) : text;
  }
  return out;
}

function resultSymbol(result: KeyResult, degraded: boolean, style: RenderStyle): Segment {
  const c = style.colors;
  if (result === 'failed') return { text: style.unicode ? '✖' : 'FAIL', paint: c.red };
  if ((result === 'rotated' || result === 'recovered') && degraded)
    return { text: style.unicode ? '▲' : 'WARN', paint: c.yellow };
  if (result === 'rotated' || result === 'recovered')
    return { text: style.unicode ? '✔' : 'ok', paint: c.green };
  if (result === 'aborted') return { text: style.unicode ? '■' : 'STOP', paint: c.yellow };
  return { text: style.unicode ? '–' : '-', paint: c.dim };
}

/** One finished key: symbol, id, result, then where it went and how long the secret was exposed. */
export function finishedLine(finished: FinishedKey, style: RenderStyle, width: number): string {
  const { outcome } = finished;
  const c = style.colors;
  const parts: string[] = [];
  if (outcome.result === 'failed') {
    parts.push(`at ${outcome.step}: ${outcome.errorCode}`);
    if (finished.nextAction) parts.push(finished.nextAction);
  } else if (outcome.result === 'rotated' || outcome.result === 'recovered') {
    if (outcome.versions?.length)
      parts.push(outcome.versions.map((v) => `${v.backend}:${v.path} v${v.version}`).join(', '));
    if (outcome.exposureMs !== undefined) parts.push(`exposure ${formatDuration(outcome.exposureMs)}`);
    if (finished.fingerprint) parts.push(`fingerprint ${finished.fingerprint}`);
    if (outcome.degraded) parts.push('degraded: not in every destination');
    if (outcome.rolledKeyId && outcome.rolledKeyId !== outcome.keyId)
      parts.push(`rolled ${outcome.rolledKeyId}`);
  } else if (outcome.detail) {
    parts.push(outcome.detail);
  }
  // A skip is a decision, not work: how long it took says nothing.
  if (outcome.result !== 'skipped') parts.push(formatDuration(outcome.durationMs));
  const resultPaint =
    outcome.result === 'failed'
      ? c.red
      : outcome.result === 'rotated' || outcome.result === 'recovered'
        ? c.green
        : c.dim;
  return fitLine(
    [
      resultSymbol(outcome.result, outcome.degraded === true, style),
      { text: ` ${outcome.keyId.padEnd(style.keyWidth)}  ` },
      { text: outcome.result.padEnd(9), paint: resultPaint },
      { text: `  ${parts.join(separator(style))}`, paint: outcome.result === 'failed' ? undefined : c.dim },
    ],
    width,
  );
}

/** One key in progress: spinner, id, the step it is in, and a retry or wait. */
export function activeLine(key: KeyProgress, frame: number, style: RenderStyle, width: number): string {
  const c = style.colors;
  const spinner = style.unicode ? (SPINNER_FRAMES[frame % SPINNER_FRAMES.length] ?? '*') : '*';
  const extras = [key.note, key.fingerprint ? `fingerprint ${key.fingerprint}` : undefined].filter(
    (part) => part !== undefined,
  );
  return fitLine(
    [
      { text: spinner, paint: c.cyan },
      { text: ` ${key.keyId.padEnd(style.keyWidth)}  ` },
      { text: key.step.padEnd(9), paint: c.cyan },
      { text: extras.length > 0 ? `  ${extras.join(separator(style))}` : '', paint: c.dim },
    ],
    width,
  );
}

const RESULT_ORDER: readonly KeyResult[] = ['rotated', 'recovered', 'failed', 'skipped', 'busy', 'aborted'];

/** `[3/10] rotated 2, failed 1 · 4 in progress · alerts sent 1`. */
export function counterLine(
  counts: RunCounts,
  inProgress: number,
  style: RenderStyle,
  width: number,
): string {
  const c = style.colors;
  const sep = separator(style);
  const segments: Segment[] = [{ text: `[${counts.done}/${counts.total}]`, paint: c.bold }];
  let first = true;
  for (const result of RESULT_ORDER) {
    const n = counts.results.get(result);
    if (!n) continue;
    segments.push(
      { text: first ? ' ' : ', ' },
      { text: `${result} ${n}`, paint: result === 'failed' ? c.red : undefined },
    );
    first = false;
  }
  if (inProgress > 0) segments.push({ text: `${sep}${inProgress} in progress`, paint: c.dim });
  if (counts.alertsSent > 0) segments.push({ text: `${sep}alerts sent ${counts.alertsSent}`, paint: c.dim });
  if (counts.alertsUndeliverable > 0)
    segments.push({ text: `${sep}alerts undeliverable ${counts.alertsUndeliverable}`, paint: c.red });
  return fitLine(segments, width);
}

const separator = (style: RenderStyle): string => (style.unicode ? ' · ' : ' | ');

export function abortedLine(why: string, style: RenderStyle, width: number): string {
  return fitLine(
    [
      { text: style.unicode ? '■' : 'STOP', paint: style.colors.yellow },
      { text: ` run aborted: ${why}`, paint: style.colors.yellow },
    ],
    width,
  );
}
