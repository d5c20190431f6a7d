// SIGTERM and SIGKILL cases: `keyroll run` as a child process (node src/cli/entry.ts) against
// the bench's emulator and store, held at a chosen instant — paused at a step
// (KEYROLL_TEST_PAUSE_AT), a roll the API applied but does not answer, a delayed roll answer, or
// a lock request held at the fault proxy — then signalled. The next run is the engine in-process
// with a later clock, as the next CronJob run would be (a dead runner's lock has expired by then).
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, type TestContext } from 'vitest';
import { createAuditLog } from '../../src/audit/logger.ts';
import { spawnCli, type CliResult, type RunningCli } from '../cli/harness.ts';
import { waitFor } from '../support/wait-for.ts';
import { OWNER_TOKEN, type CaseKey, type FaultBench } from './bench.ts';
import { caseName, type CaseSpec } from './cases.ts';
import { isUsable, judgeCase, type KeyEvidence } from './judge.ts';
import type { FaultCaseResult, RunReport } from './record.ts';
import {
  NEXT_RUN_LATER_MS,
  SETTLE_RUN_LATER_MS,
  markerHeldForSafety,
  resultOf,
  runKeyroll,
} from './run-case.ts';

/** The child's API timeout: far longer than any hold, so the signal, not a timeout, ends the hold. */
const CHILD_API_TIMEOUT_MS = 60_000;

/** The first lock write of each store, as its bytes appear on the wire. */
const LOCK_REQUEST: Record<'vault' | 'aws', RegExp> = {
  vault: /^POST \/v1\/secret\/data\/\S+\.keyroll-lock /,
  // The first lock of a secret creates its companion `<name>.keyroll-lock`.
  aws: /x-amz-target:\s*secretsmanager\.CreateSecret/i,
};

function childPolicy(bench: FaultBench, keys: readonly CaseKey[]): string {
  return JSON.stringify({
    version: 1,
    api: {
      baseUrl: bench.emulator.url,
      credential: { type: 'bearer', token: 'env:KEYROLL_API_TOKEN' },
      timeouts: { headersMs: CHILD_API_TIMEOUT_MS, bodyMs: CHILD_API_TIMEOUT_MS },
      rateLimitPerMinute: 60_000,
    },
    backends: { primary: bench.store.config },
    alerts: { sinks: { hook: { kind: 'webhook', url: `${bench.receiver.url}/alerts` } } },
    defaults: {
      schedule: null,
      maxAge: '30d',
      minInterval: '1h',
      lockTtl: '10m',
      store: { attempts: 3, initialBackoff: '1ms', maxBackoff: '2ms' },
    },
    keys: keys.map((key) => ({
      id: key.keyId,
      organization: key.organizationId,
      destinations: [{ backend: 'primary', path: key.target.path, shape: key.target.shape }],
    })),
  });
}

/** Waits for the emulator to have applied a roll of `keyId` (in-memory state, checked every few ms). */
async function rollApplied(bench: FaultBench, keyId: string, child: RunningCli): Promise<void> {
  const process_ = { exited: false };
  void child.result.then(() => (process_.exited = true));
  await waitFor(
    () => {
      if (process_.exited) throw new Error('keyroll exited before the roll was applied');
      return bench.emulator.state.rollCount(keyId) > 0;
    },
    `the roll of ${keyId} applied`,
    { intervalMs: 5, timeoutMs: 120_000 },
  );
}

/** What a finished child run reported, from its audit lines; undefined for a killed process. */
function reportOf(result: CliResult, keys: readonly CaseKey[]): RunReport | undefined {
  const started = result.events.find((e) => e.event === 'run.started');
  if (!started || !result.events.some((e) => e.event === 'run.finished')) return undefined;
  const aborted = result.events.find((e) => e.event === 'run.aborted');
  return {
    runId: String(started.runId),
    outcomes: keys.map((key) => {
      const mine = result.events.filter((e) => e.keyId === key.keyId);
      const done =
        mine.find((e) => e.event === 'key.succeeded') ??
        mine.find((e) => e.event === 'key.failed' && e.step !== 'finish');
      if (!done) return { keyId: key.keyId, result: 'aborted' };
      return {
        keyId: key.keyId,
        result: done.event === 'key.succeeded' ? 'rotated' : 'failed',
        rotationId: String(done.rotationId),
      };
    }),
    ...(aborted ? { aborted: { reason: String(aborted.why) } } : {}),
  };
}

/** Starts keyroll and lands the case's signal at the case's instant; resolves when it has exited. */
async function signalChild(
  bench: FaultBench,
  spec: CaseSpec,
  keys: readonly CaseKey[],
  policyFile: string,
): Promise<CliResult> {
  const [first] = keys;
  if (!first) throw new Error('a signal case needs a key');
  const env: Record<string, string> = { ...bench.store.env, KEYROLL_API_TOKEN: OWNER_TOKEN };
  const paused = spec.fault === 'SIGKILL' && spec.step !== 'roll';
  if (paused) env.KEYROLL_TEST_PAUSE_AT = spec.step;
  if (spec.fault === 'SIGKILL' && spec.step === 'roll')
    bench.emulator.faults.inject('roll', { kind: 'failAfterApply', then: 'hang' });
  if (spec.fault === 'SIGTERM' && spec.step === 'roll')
    bench.emulator.faults.inject('roll', { kind: 'delay', ms: 1 });
  const lockRequest =
    spec.fault === 'SIGTERM' && spec.step === 'lock'
      ? LOCK_REQUEST[bench.kind as 'vault' | 'aws']
      : undefined;
  const proxy = bench.store.proxy;
  if (lockRequest) {
    if (!proxy) throw new Error(`SIGTERM at lock needs a fault proxy (${bench.kind})`);
    proxy.set({ kind: 'hold', match: lockRequest });
  }

  const child = spawnCli(['run', '--policy', policyFile, '--concurrency', '1'], bench.dir, { env });
  try {
    if (paused) await child.stderrIncludes(`keyroll: paused at ${spec.step}`);
    else if (spec.fault === 'SIGKILL') await rollApplied(bench, first.keyId, child);
    else if (lockRequest) await proxy?.held();
    else await bench.gate.reached();
    child.child.kill(spec.fault === 'SIGKILL' ? 'SIGKILL' : 'SIGTERM');
    if (spec.fault === 'SIGTERM') {
      await child.stderrIncludes('SIGTERM received');
      // The held call goes on after the signal: what is in flight finishes, nothing new starts.
      if (lockRequest) proxy?.release();
      else bench.gate.open();
    }
    return await child.result;
  } finally {
    if (child.child.exitCode === null && child.child.signalCode === null) child.child.kill('SIGKILL');
    proxy?.set({ kind: 'pass' });
    bench.gate.open();
    bench.emulator.faults.clear();
  }
}

export async function runSignalCase(ctx: TestContext, bench: FaultBench, spec: CaseSpec): Promise<void> {
  const name = caseName(spec, bench.kind);
  // SIGTERM during a roll: a second key shows that nothing new starts after the signal.
  const keys = [
    await bench.newKey(name),
    ...(spec.fault === 'SIGTERM' && spec.step === 'roll' ? [await bench.newKey(`${name} (next key)`)] : []),
  ];
  const policyFile = join(bench.dir, `policy-${keys[0]?.keyId ?? 'case'}.json`);
  await writeFile(policyFile, childPolicy(bench, keys));
  const bodiesBefore = bench.receiver.requests.length;

  const child = await signalChild(bench, spec, keys, policyFile);
  const afterFault = await Promise.all(
    keys.map(async (key) => ({
      usable: isUsable(await bench.copiesOf(key), bench.emulator),
      state: await bench.store.direct.readState(key.target),
      rolls: bench.emulator.state.rollCount(key.keyId),
    })),
  );

  const lines: string[] = [];
  const audit = createAuditLog({ destination: { write: (line: string) => void lines.push(line) } });
  const later = (): Date => new Date(Date.now() + NEXT_RUN_LATER_MS);
  const nextPolicy = bench.policy(keys, { safetyNet: 'none', sinkUrl: `${bench.receiver.url}/alerts` });
  const nextRuns = [await runKeyroll(bench, nextPolicy, audit, {}, later)];
  // Invariant 9: a marker the next run kept (it took the dead runner's lock over) clears one run later.
  const held = await Promise.all(
    keys.map(async (key) =>
      markerHeldForSafety((await bench.store.direct.readState(key.target)).intent, lines),
    ),
  );
  if (held.some(Boolean))
    nextRuns.push(
      await runKeyroll(bench, nextPolicy, audit, {}, () => new Date(Date.now() + SETTLE_RUN_LATER_MS)),
    );
  const next = nextRuns.at(-1) ?? nextRuns[0];
  if (next === undefined) throw new Error('no next run');

  const evidence: KeyEvidence[] = [];
  for (const [index, key] of keys.entries()) {
    const state = await bench.store.direct.readState(key.target);
    evidence.push({
      keyId: key.keyId,
      usableAfterFault: afterFault[index]?.usable ?? false,
      intentAfterFault: afterFault[index]?.state.intent !== undefined,
      usableAfterNext: isUsable(await bench.copiesOf(key), bench.emulator),
      intentAfterNext: state.intent !== undefined,
    });
  }
  const childReport = reportOf(child, keys);
  const verdict = judgeCase({
    keys: evidence,
    runs: [...(childReport ? [childReport] : []), ...nextRuns],
    auditLines: [child.stdout, ...lines],
    alertBodies: bench.receiver.requests.slice(bodiesBefore).map((r) => r.raw),
    otherOutput: [
      child.stderr,
      JSON.stringify(nextRuns),
      ...(await Promise.all(keys.map((key) => bench.leftovers(key)))).flat(),
    ],
    emulator: bench.emulator,
    ...(spec.fault === 'SIGKILL'
      ? { crashed: evidence.filter((key) => key.intentAfterFault).map((key) => key.keyId) }
      : {}),
  });
  // A killed process reports nothing: its run counts as aborted.
  const result: FaultCaseResult =
    !childReport || childReport.aborted ? 'aborted' : (childReport.outcomes[0]?.result as FaultCaseResult);
  verdict.record(ctx, { case: name, fault: spec.fault, backend: bench.kind, step: spec.step, result });

  verdict.assertInvariants();
  expect(result, `the signalled run's result for ${name}`).toBe(spec.expect);
  expect(child.code, 'exit code').toBe(spec.fault === 'SIGKILL' ? null : 3);
  if (spec.fault === 'SIGTERM' && spec.step === 'roll') {
    // The key in flight finished its store and its rotation before the process exited.
    expect(evidence[0]?.usableAfterFault, 'the in-flight key is usable right after SIGTERM').toBe(true);
    expect(evidence[0]?.intentAfterFault, 'the in-flight key finished its rotation').toBe(false);
    expect(afterFault[1]?.rolls, 'no roll of the next key after SIGTERM').toBe(0);
  }
  for (const key of keys)
    expect(resultOf(next, key.keyId), 'the next run').toMatch(/^(rotated|recovered|skipped)$/);
}
