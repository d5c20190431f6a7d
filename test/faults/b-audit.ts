// Reading what a `keyroll run` child reported from its audit lines alone (the run command prints
// no per-key report): the run id and, per key, how its rotation ended, in the shape the shared
// checkers of record.ts take.
import type { RunReport } from './record.ts';

type Outcome = RunReport['outcomes'][number];

/** The events of one key, in order. */
function eventsOf(events: readonly Record<string, unknown>[], keyId: string): Record<string, unknown>[] {
  return events.filter((event) => event.keyId === keyId);
}

/**
 * How the key's rotation ended: `failed` when a rotation step failed (a `key.failed` at any step
 * but `recovery`, whose repair issues are reported and retried on their own), `rotated` after
 * `key.succeeded`, `recovered` when a leftover intent was repaired without a new roll, `skipped`
 * when the key was not due or locked; undefined when the run never reached the key.
 */
export function keyOutcome(events: readonly Record<string, unknown>[], keyId: string): Outcome | undefined {
  const mine = eventsOf(events, keyId);
  if (mine.length === 0) return undefined;
  const rotationId = mine.map((event) => event.rotationId).find((id): id is string => typeof id === 'string');
  const withId = (result: string): Outcome => ({
    keyId,
    result,
    ...(rotationId === undefined ? {} : { rotationId }),
  });
  if (mine.some((event) => event.event === 'key.failed' && event.step !== 'recovery'))
    return withId('failed');
  if (mine.some((event) => event.event === 'key.succeeded')) return withId('rotated');
  if (mine.some((event) => event.event === 'key.recovered')) return withId('recovered');
  return withId('skipped');
}

/** The run's report for the alert check, from the audit of one run. */
export function runReportFromAudit(
  events: readonly Record<string, unknown>[],
  keyIds: readonly string[],
): RunReport {
  const started = events.find((event) => event.event === 'run.started');
  const aborted = events.find((event) => event.event === 'run.aborted');
  const outcomes = keyIds
    .map((keyId) => keyOutcome(events, keyId))
    .filter((outcome): outcome is Outcome => outcome !== undefined);
  return {
    runId: typeof started?.runId === 'string' ? started.runId : 'unknown-run',
    outcomes,
    ...(aborted ? { aborted: { reason: String(aborted.why) } } : {}),
  };
}
