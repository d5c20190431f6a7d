// The field types the policy's sections share: names of instances, durations, cron expressions,
// time zones. Each is checked by keyroll's own rules, so its error names the value's problem in a
// sentence (never a generic "invalid string").
import { z } from 'zod';
import { cronProblem, timeZoneProblem } from './cron.ts';
import { durationProblem } from './duration.ts';

/** Names of backends and alert sinks: they appear in audit events, alerts and metric labels. */
export const InstanceName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/, {
  error: 'must start with a letter or digit and hold only letters, digits, ".", "_" and "-"',
});

// A bare number (`maxAge: 30`) gets its own sentence: the unit is what is missing.
const notText = (what: string) => (issue: { input?: unknown }) =>
  issue.input === undefined ? undefined : `must be ${what}`;

export const Duration = z
  .string({ error: notText('a duration with a unit, such as 30d or 15m') })
  .superRefine((text, ctx) => {
    const problem = durationProblem(text);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  })
  .describe(
    'A duration: a number and a unit (ms, s, m, h, d, w), e.g. 90s, 15m, 7d, or a sum such as 1h30m.',
  );

export const CronExpression = z
  .string({ error: notText('a cron expression in quotes, such as "0 3 * * 1"') })
  .superRefine((pattern, ctx) => {
    const problem = cronProblem(pattern);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  })
  .describe(
    'A cron expression in croner syntax: 5 fields (minute hour day month weekday), 6-7 with seconds/year, or @daily, @weekly, ...',
  );

export const TimeZone = z
  .string({ error: notText('an IANA time zone name, such as UTC or Europe/Berlin') })
  .superRefine((zone, ctx) => {
    const problem = timeZoneProblem(zone);
    if (problem !== undefined) ctx.addIssue({ code: 'custom', message: problem });
  })
  .describe('An IANA time zone, e.g. UTC or Europe/Berlin.');
