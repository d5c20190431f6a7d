// The rules of two-slot entries (invariant 10: consumers keep working). A slot entry names two
// API keys of its organization; a rotation rolls the standby slot and makes it active, so the
// slot that just stopped being active is rolled at the next rotation. Every setting that could
// bring that next rotation sooner than consumerRefresh (minInterval, maxAge, the schedule) is
// refused at load, and so is any way one API key could belong to two entries: two entries
// rolling one key would each kill the secret the other stored.
import { scheduleOf } from './cron.ts';
import { formatDuration, parseDuration } from './duration.ts';
import type { DocPath } from './issue-text.ts';
import type { PolicyDocument } from './schema.ts';
import type { EffectiveSettings, Sourced } from './settings.ts';

type AddIssue = (path: DocPath, message: string) => void;

/** How many upcoming fires of a schedule are compared (a daily schedule: well over a year, so both DST changes). */
export const SCHEDULE_FIRES_CHECKED = 500;

const CONSEQUENCE = 'so a slot could be rolled while consumers may still use its value';

/** Ids across entries: no API key in two entries, no slot that is an entry's id. */
export function checkSlotIds(doc: PolicyDocument, add: AddIssue): void {
  // Every id that names an entry (single key or slot entry), first writer wins.
  const entryAt = new Map<string, number>();
  doc.keys.forEach((key, index) => {
    if (!entryAt.has(key.id)) entryAt.set(key.id, index);
  });
  const slotOwner = new Map<string, { index: number; at: number }>();

  doc.keys.forEach((key, index) => {
    key.slots?.forEach((slot, at) => {
      const path: DocPath = ['keys', index, 'slots', at];
      const quoted = JSON.stringify(slot);
      const previous = slotOwner.get(slot);
      const entry = entryAt.get(slot);
      if (previous?.index === index) {
        add(path, `${quoted} is also slots[${previous.at}]; the two slots must be two different API keys`);
      } else if (previous !== undefined) {
        add(
          path,
          `${quoted} is already a slot of keys[${previous.index}] (${doc.keys[previous.index]?.id ?? ''}); an API key may belong to one entry only`,
        );
      } else if (entry === index) {
        add(
          path,
          `${quoted} is also this entry's id; a slot entry's id names the entry and must not be one of its API key ids`,
        );
      } else if (entry !== undefined && doc.keys[entry]?.slots === undefined) {
        add(path, `${quoted} is also the single key keys[${entry}]; an API key may belong to one entry only`);
      } else if (entry !== undefined) {
        add(
          path,
          `${quoted} is the id of the slot entry keys[${entry}]; a slot entry's id names the entry and must not be an API key id`,
        );
      }
      if (previous === undefined) slotOwner.set(slot, { index, at });
    });
  });
}

/** consumerRefresh goes with slots, and nothing may roll a slot sooner than consumerRefresh after it stopped being active. */
export function checkSlotTiming(
  doc: PolicyDocument,
  index: number,
  settings: EffectiveSettings,
  add: AddIssue,
  now: Date = new Date(),
): void {
  const key = doc.keys[index];
  if (key === undefined) return;
  const keyPath: DocPath = ['keys', index];
  const refresh = settings.consumerRefresh;
  if (key.slots === undefined) {
    if (refresh.value !== undefined)
      add(
        [...keyPath, 'consumerRefresh'],
        'applies only to slot entries (an entry with slots: [KEY_A, KEY_B]); add slots or remove consumerRefresh',
      );
    return;
  }
  if (refresh.value === undefined) {
    add(
      [...keyPath, 'consumerRefresh'],
      'is required with slots: the longest time a consumer may keep using a value it read (e.g. 1h)',
    );
    return;
  }
  const refreshMs = parseDuration(refresh.value);
  const refreshText = `consumerRefresh (${formatDuration(refreshMs)})`;

  const minIntervalMs = parseDuration(settings.minInterval.value);
  if (minIntervalMs < refreshMs) {
    add(
      nearer(settings.minInterval, refresh) ?? keyPath,
      `minInterval (${formatDuration(minIntervalMs)}${builtinNote(settings.minInterval)}) is shorter than ${refreshText}, ${CONSEQUENCE}; set minInterval to at least consumerRefresh`,
    );
  }
  if (settings.maxAge.value !== undefined) {
    const maxAgeMs = parseDuration(settings.maxAge.value);
    if (maxAgeMs < refreshMs) {
      add(
        nearer(settings.maxAge, refresh) ?? keyPath,
        `maxAge (${formatDuration(maxAgeMs)}) is shorter than ${refreshText}, ${CONSEQUENCE}; raise maxAge or lower consumerRefresh`,
      );
    }
  }
  if (settings.schedule.value !== undefined) {
    const gap = smallestScheduleGap(settings.schedule.value, settings.timezone.value, now);
    if (gap !== undefined && gap.ms < refreshMs) {
      add(
        nearer(settings.schedule, refresh) ?? keyPath,
        `schedule ${JSON.stringify(settings.schedule.value)} fires ${formatDuration(gap.ms)} apart at ${gap.after.toISOString()} (${settings.timezone.value}), less than ${refreshText}, ${CONSEQUENCE}; choose a schedule whose fires are at least consumerRefresh apart`,
      );
    }
  }
}

/**
 * The shortest time between two consecutive fires among the next SCHEDULE_FIRES_CHECKED after
 * `now`, measured in real time (a daily schedule in a zone with DST has a 23h gap once a year),
 * and the fire that gap starts at. Undefined when fewer than two fires remain.
 */
export function smallestScheduleGap(
  pattern: string,
  timezone: string,
  now: Date,
): { ms: number; after: Date } | undefined {
  const fires = scheduleOf(pattern, timezone).nextRuns(SCHEDULE_FIRES_CHECKED, now);
  let smallest: { ms: number; after: Date } | undefined;
  for (let at = 1; at < fires.length; at += 1) {
    const previous = fires[at - 1];
    const next = fires[at];
    if (previous === undefined || next === undefined) continue;
    const ms = next.getTime() - previous.getTime();
    if (smallest === undefined || ms < smallest.ms) smallest = { ms, after: previous };
  }
  return smallest;
}

/** The setting's own line when it is written at the key, else consumerRefresh's (always at the key). */
function nearer(setting: Sourced<unknown>, refresh: Sourced<unknown>): DocPath | undefined {
  if (setting.path?.[0] === 'keys') return setting.path;
  return refresh.path ?? setting.path;
}

function builtinNote(setting: Sourced<unknown>): string {
  return setting.path === undefined ? ', the built-in default' : '';
}
