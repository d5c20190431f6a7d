// One in-process fault case: arm the fault, run keyroll (the engine, as `keyroll run` does), put
// the world back, run keyroll again as the next scheduled run would, then ask the four questions
// and record the figures. The next run is always made: it is where an unusable key or a leftover
// intent must be repaired, and for a clean case it proves nothing is rotated twice.
import { expect, type TestContext } from 'vitest';
import { staticCredential } from '../../src/api/credentials.ts';
import { createAlerter } from '../../src/alerts/alerter.ts';
import type { AuditLog } from '../../src/audit/events.ts';
import { createAuditLog } from '../../src/audit/logger.ts';
import { Secret } from '../../src/audit/secret.ts';
import type { Policy } from '../../src/policy/schema.ts';
import { createRuntime } from '../../src/rotation/runtime.ts';
import { runRotations, type RunSummary } from '../../src/rotation/run.ts';
import { refusedUrl, startReceiver, type Receiver } from '../support/alert-receiver.ts';
import { armFault, type ArmedFault } from './arm.ts';
import { OWNER_TOKEN, type CaseKey, type FaultBench } from './bench.ts';
import { caseName, type CaseSpec } from './cases.ts';
import { isUsable, judgeCase, type CaseEvidence } from './judge.ts';
import type { FaultCaseResult } from './record.ts';

/** The next run happens later, as a CronJob's would: a lock left by a failed release has expired by then. */
export const NEXT_RUN_LATER_MS = 10 * 60_000;

/**
 * Invariant 9: a next run that took over a dead runner's lock keeps that runner's marker (it may
 * still act) or holds its own for one lock TTL, so the repair ends one run later. The run after
 * the next is made only then, a day later (past any hold), and the case is judged after it.
 */
export const SETTLE_RUN_LATER_MS = 24 * 3600_000;

export function markerHeldForSafety(
  intent: { holdUntil?: string } | undefined,
  nextRunLines: readonly string[],
): boolean {
  if (intent === undefined) return false;
  return (
    intent.holdUntil !== undefined || nextRunLines.some((line) => line.includes('"event":"key.intent.kept"'))
  );
}

const noWait = (): Promise<void> => Promise.resolve();

/** One `keyroll run` of the policy's keys, in-process (the engine the CLI calls), with the fault armed. */
export async function runKeyroll(
  bench: FaultBench,
  policy: Policy,
  audit: AuditLog,
  armed: Partial<ArmedFault>,
  now?: () => Date,
): Promise<RunSummary> {
  const alerter = createAlerter({
    sinks: policy.alerts.sinks,
    audit,
    sleep: noWait,
    retry: { attempts: 2, initialBackoffMs: 1, maxBackoffMs: 1 },
  });
  const runtime = await createRuntime(policy, {
    audit,
    alerter,
    credentials: staticCredential(new Secret(OWNER_TOKEN), 'fault-suite owner token'),
    sleep: noWait,
    env: { ...bench.store.env },
    ...(now ? { now } : {}),
    ...(armed.wrapBackend ? { wrapBackend: armed.wrapBackend } : {}),
    ...(armed.checkpoint ? { checkpoint: armed.checkpoint } : {}),
    ...(armed.observer ? { observer: armed.observer } : {}),
    ...(armed.monotonicMs ? { monotonicMs: armed.monotonicMs } : {}),
  });
  try {
    return await runRotations(runtime, {
      keys: policy.keys,
      trigger: { reason: 'scheduled', force: false },
      concurrency: 1,
    });
  } finally {
    await runtime.close();
  }
}

export function resultOf(summary: RunSummary, keyId: string): FaultCaseResult {
  if (summary.aborted) return 'aborted';
  const result = summary.outcomes.find((o) => o.keyId === keyId)?.result;
  if (
    result === 'rotated' ||
    result === 'failed' ||
    result === 'recovered' ||
    result === 'skipped' ||
    result === 'aborted'
  )
    return result;
  throw new Error(`key ${keyId} ended ${String(result)}`);
}

/** Where alerts go in the faulted run: the bench's receiver, one answering 500, or a closed port. */
async function sinkFor(bench: FaultBench, spec: CaseSpec): Promise<{ url: string; receiver?: Receiver }> {
  if (spec.fault === 'alert sink closed') return { url: await refusedUrl() };
  if (spec.fault === 'alert sink answers 500') {
    const receiver = await startReceiver();
    receiver.answer(...Array.from({ length: 20 }, () => 500));
    return { url: `${receiver.url}/alerts`, receiver };
  }
  return { url: `${bench.receiver.url}/alerts` };
}

export async function runInProcessCase(ctx: TestContext, bench: FaultBench, spec: CaseSpec): Promise<void> {
  const name = caseName(spec, bench.kind);
  const key: CaseKey = await bench.newKey(name);
  const lines: string[] = [];
  const audit = createAuditLog({ destination: { write: (line: string) => void lines.push(line) } });
  const bodiesBefore = bench.receiver.requests.length;
  const safetyNet = spec.safetyNet ?? 'none';
  const sink = await sinkFor(bench, spec);

  const armed = armFault(bench, key, spec);
  let first: RunSummary;
  let throttles: { refused: number; counted: number } | undefined;
  try {
    first = await runKeyroll(bench, bench.policy([key], { safetyNet, sinkUrl: sink.url }), audit, armed);
    throttles = armed.afterRun?.();
  } finally {
    await armed.restore();
    await sink.receiver?.close();
  }
  const usableAfterFault = isUsable(await bench.copiesOf(key), bench.emulator);
  const stateAfterFault = await bench.store.direct.readState(key.target);

  const later = (): Date => new Date(Date.now() + NEXT_RUN_LATER_MS);
  const linesBeforeNext = lines.length;
  const nextPolicy = bench.policy([key], { safetyNet, sinkUrl: `${bench.receiver.url}/alerts` });
  const runs: RunSummary[] = [first, await runKeyroll(bench, nextPolicy, audit, {}, later)];
  let stateAfterNext = await bench.store.direct.readState(key.target);
  if (markerHeldForSafety(stateAfterNext.intent, lines.slice(linesBeforeNext))) {
    runs.push(
      await runKeyroll(bench, nextPolicy, audit, {}, () => new Date(Date.now() + SETTLE_RUN_LATER_MS)),
    );
    stateAfterNext = await bench.store.direct.readState(key.target);
  }
  const next = runs.at(-1) ?? first;
  const afterNext = await bench.copiesOf(key);

  const evidence: CaseEvidence = {
    keys: [
      {
        keyId: key.keyId,
        usableAfterFault,
        intentAfterFault: stateAfterFault.intent !== undefined,
        usableAfterNext: isUsable(afterNext, bench.emulator),
        intentAfterNext: stateAfterNext.intent !== undefined,
      },
    ],
    runs,
    auditLines: lines,
    alertBodies: [
      ...bench.receiver.requests.slice(bodiesBefore).map((r) => r.raw),
      ...(sink.receiver?.requests.map((r) => r.raw) ?? []),
    ],
    otherOutput: [JSON.stringify(runs), ...(await bench.leftovers(key))],
    emulator: bench.emulator,
  };
  if (process.env.KEYROLL_FAULTS_DEBUG) for (const line of lines) process.stderr.write(line);
  const verdict = judgeCase(evidence);
  const result = resultOf(first, key.keyId);
  verdict.record(ctx, {
    case: name,
    fault: spec.during ? `${spec.fault} (${spec.during})` : spec.fault,
    backend: bench.kind,
    step: spec.step,
    result,
  });

  verdict.assertInvariants();
  expect(result, `the faulted run's result for ${name}`).toBe(spec.expect);
  expect(resultOf(next, key.keyId), 'the next run').toMatch(/^(rotated|recovered|skipped)$/);
  // Invariant 11: every throttle answer the quota proxy sent was met, waited out and counted.
  if (throttles !== undefined)
    expect(throttles.counted, 'throttle answers keyroll counted').toBe(throttles.refused);
  if (spec.fault === 'backend answer lost after applying' && bench.store.versions) {
    // Invariant 8: the retried write of the same rotation added no second version (seed + one).
    expect(await bench.store.versions(key.target), 'versions of the value').toBe(2);
  }
}
