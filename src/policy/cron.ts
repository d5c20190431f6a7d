// Schedules use croner's syntax (5 fields, or 6/7 with seconds and year; nicknames such as
// @daily) read in an IANA time zone. Validation and due-ness both go through croner, so a pattern
// the loader accepts is exactly a pattern the scheduler can run.
import { Cron } from 'croner';

/** Why `pattern` is not a usable schedule, as a sentence after the field path; undefined when it is. */
export function cronProblem(pattern: string, now: Date = new Date()): string | undefined {
  const quoted = JSON.stringify(pattern);
  let cron: Cron;
  try {
    cron = new Cron(pattern);
  } catch (error) {
    const detail = cronErrorDetail(error);
    return detail === undefined
      ? `${quoted} is not a cron expression`
      : `${quoted} is not a cron expression (${detail})`;
  }
  // A pattern such as `0 0 31 2 *` parses but never fires: the key would never be due by schedule.
  if (cron.nextRun(now) === null) return `${quoted} never fires`;
  return undefined;
}

/** True when `zone` is an IANA time zone (or UTC) this Node.js knows. */
export function isTimeZone(zone: string): boolean {
  if (zone === '') return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

export function timeZoneProblem(zone: string): string | undefined {
  return isTimeZone(zone)
    ? undefined
    : `${JSON.stringify(zone)} is not an IANA time zone (e.g. UTC, Europe/Berlin, America/New_York)`;
}

// Parsed schedules are reused: `plan` and the daemon ask for the same few patterns for every key.
const schedules = new Map<string, Cron>();
const MAX_CACHED = 1024;

/** A croner schedule (never started: no timer, no callback) for `pattern` read in `timezone`. */
export function scheduleOf(pattern: string, timezone: string): Cron {
  const cacheKey = `${timezone}\u0000${pattern}`;
  let cron = schedules.get(cacheKey);
  if (cron === undefined) {
    cron = new Cron(pattern, { timezone });
    if (schedules.size >= MAX_CACHED) schedules.clear();
    schedules.set(cacheKey, cron);
  }
  return cron;
}

/** The first occurrence strictly after `after`, or undefined when the pattern never fires again. */
export function nextOccurrence(pattern: string, timezone: string, after: Date): Date | undefined {
  return scheduleOf(pattern, timezone).nextRun(after) ?? undefined;
}

// croner says e.g. "CronPattern: Invalid value for minute: 61"; the part after the prefix is a
// useful hint. The generic "exactly five, six, or seven ... parts" message adds nothing to
// "is not a cron expression" (and echoes the pattern again), so it is dropped.
function cronErrorDetail(error: unknown): string | undefined {
  if (!(error instanceof Error)) return undefined;
  const text = error.message.replace(/^CronPattern:\s*/, '');
  if (/space separated parts/.test(text) || text.includes('(')) return undefined;
  return text.charAt(0).toLowerCase() + text.slice(1);
}
