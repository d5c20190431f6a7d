// The daemon's cron jobs: one croner job per distinct (schedule, time zone) of the policy, so a
// thousand keys on "0 3 * * 1" make one run at 03:00 rather than a thousand, each with its own
// credential check. A tick only asks; whether a key rotates is decided from its backend state
// (decideDue), so a tick after a restart never rotates a key twice.
import { Cron } from 'croner';
import type { KeyPolicy } from '../policy/public/schema.ts';

export interface ScheduleGroup {
  pattern: string;
  /** IANA zone the pattern is read in (croner handles DST). */
  timezone: string;
  keyIds: string[];
}

export interface ScheduleInfo extends ScheduleGroup {
  /** ISO-8601 time of the next tick, or null when the pattern never fires again. */
  nextRunAt: string | null;
}

export interface ScheduledJobs {
  describe(): ScheduleInfo[];
  /** Stops every job for good (shutdown, or a reloaded policy replacing them). */
  stop(): void;
}

/** Keys with a schedule, grouped by pattern and zone, in policy order. Keys without one are left to the sweep. */
export function groupSchedules(keys: readonly KeyPolicy[]): ScheduleGroup[] {
  const groups = new Map<string, ScheduleGroup>();
  for (const key of keys) {
    if (key.schedule === undefined) continue;
    const id = `${key.timezone}\u0000${key.schedule}`;
    const group = groups.get(id) ?? { pattern: key.schedule, timezone: key.timezone, keyIds: [] };
    group.keyIds.push(key.id);
    groups.set(id, group);
  }
  return [...groups.values()];
}

export interface StartScheduleOptions {
  /** Runs the group's keys; the job does not fire again until this settles (croner `protect`). */
  onTick: (group: ScheduleGroup) => Promise<void>;
  /** A tick came while the previous run of the same group was still going: it is skipped. */
  onOverrun?: (group: ScheduleGroup) => void;
  /** onTick threw (it should not: it reports its own failures). */
  onError: (group: ScheduleGroup, error: unknown) => void;
}

export function startSchedules(
  groups: readonly ScheduleGroup[],
  options: StartScheduleOptions,
): ScheduledJobs {
  const jobs = groups.map((group) => ({
    group,
    job: new Cron(
      group.pattern,
      {
        timezone: group.timezone,
        // A group's run never overlaps itself; the per-key locks also keep it off keys a
        // trigger or the sweep is rotating.
        protect: () => options.onOverrun?.(group),
        // croner does not await the job from its timer: without `catch`, a rejection would be
        // unhandled and take the daemon down.
        catch: (error: unknown) => {
          options.onError(group, error);
        },
      },
      () => options.onTick(group),
    ),
  }));
  return {
    describe: () =>
      jobs.map(({ group, job }) => ({
        ...group,
        keyIds: [...group.keyIds],
        nextRunAt: job.nextRun()?.toISOString() ?? null,
      })),
    stop: () => {
      for (const { job } of jobs) job.stop();
    },
  };
}
