// Durations in the policy are strings like `90s`, `15m`, `1h`, `7d`, `2w`, or a sum such as
// `1h30m`. Milliseconds (`200ms`) are accepted for retry backoffs. A bare number is refused:
// `maxAge: 30` could mean seconds or days, and guessing wrong rotates far too often or never.
import { KeyrollError } from '../errors.ts';

const UNIT_MS = {
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
  w: 604_800_000,
} as const;
type Unit = keyof typeof UNIT_MS;

const WHOLE = /^(?:\d+(?:ms|s|m|h|d|w))+$/;
const PART = /(\d+)(ms|s|m|h|d|w)/g;

/** Why `text` is not a usable duration, as a sentence that follows the field path; undefined when it is. */
export function durationProblem(text: string): string | undefined {
  if (!WHOLE.test(text)) {
    return `${JSON.stringify(text)} is not a duration (use a number and a unit: ms, s, m, h, d or w, e.g. 15m or 7d)`;
  }
  const ms = sumParts(text);
  if (ms === 0) return `${JSON.stringify(text)} is zero; a duration must be longer than that`;
  if (!Number.isSafeInteger(ms)) return `${JSON.stringify(text)} is too long`;
  return undefined;
}

/** Milliseconds in `text` (`15m` → 900000). Throws a KeyrollError (KR_DURATION_INVALID) for anything else. */
export function parseDuration(text: string): number {
  const problem = durationProblem(text);
  if (problem !== undefined) throw new KeyrollError('KR_DURATION_INVALID', problem);
  return sumParts(text);
}

/** The shortest exact spelling of `ms` (`5400000` → `1h30m`), for plan output and messages. */
export function formatDuration(ms: number): string {
  if (ms <= 0) return '0s';
  let rest = ms;
  let text = '';
  for (const unit of ['w', 'd', 'h', 'm', 's', 'ms'] as const) {
    const size = UNIT_MS[unit];
    const count = Math.floor(rest / size);
    if (count > 0) {
      text += `${count}${unit}`;
      rest -= count * size;
    }
  }
  return text;
}

function sumParts(text: string): number {
  let total = 0;
  for (const match of text.matchAll(PART)) {
    total += Number(match[1]) * UNIT_MS[match[2] as Unit];
  }
  return total;
}
