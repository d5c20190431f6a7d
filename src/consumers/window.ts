// The restart window (consumers.restartWindow): when restarts that can wait may start. Read in the
// window's time zone, on the wall clock of that zone, so "09:00-17:00 Europe/Berlin" follows
// daylight saving.
import type { RestartWindow } from '../policy/public/consumers.ts';

const formats = new Map<string, Intl.DateTimeFormat>();

function localTime(at: Date, timezone: string): { weekday: number; minute: number } {
  let format = formats.get(timezone);
  if (format === undefined) {
    format = new Intl.DateTimeFormat('en-US', {
      timeZone: timezone,
      weekday: 'short',
      hour: '2-digit',
      minute: '2-digit',
      hourCycle: 'h23',
    });
    formats.set(timezone, format);
  }
  const parts = format.formatToParts(at);
  const part = (type: string): string => parts.find((p) => p.type === type)?.value ?? '';
  const weekday = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'].indexOf(part('weekday'));
  return { weekday, minute: Number(part('hour')) * 60 + Number(part('minute')) };
}

/** True when a restart may start at `at`: no window, or `at` inside it. */
export function windowOpen(window: RestartWindow | undefined, at: Date): boolean {
  if (window === undefined) return true;
  const { weekday, minute } = localTime(at, window.timezone);
  return window.days.includes(weekday) && minute >= window.fromMinute && minute < window.toMinute;
}

/** The next minute the window is open at or after `at` (within 8 days); `at` itself when open. */
export function nextOpening(window: RestartWindow | undefined, at: Date): Date | undefined {
  if (windowOpen(window, at)) return at;
  const start = Math.ceil(at.getTime() / 60_000) * 60_000;
  for (let step = 0; step <= 8 * 24 * 60; step++) {
    const candidate = new Date(start + step * 60_000);
    if (windowOpen(window, candidate)) return candidate;
  }
  return undefined;
}
