// The lock-takeover order the second hostile review found (issue 18): the old holder resumes
// *before* the new holder writes. Runner A rolls and freezes right before its write (a SIGSTOP, a
// GC pause, a frozen VM: no I/O between the roll answer and the write, so that is where a freeze
// holds a rolled secret); time passes for everyone, past A's lock; runner B takes the lock over,
// finds A's marker and the stored secret dead, re-rolls and freezes right before its own write;
// A resumes and writes first, then B. A must land nothing (its lock is B's), B must land its
// write (its lease is valid). The engine runs in-process against the fault bench's store (a
// directory, OpenBao or moto), both runners on one clock the test moves, so the backends see the
// pause too; then the next scheduled runs settle the key and the case is judged like any other.
import { performance } from 'node:perf_hooks';
import { expect, type TestContext } from 'vitest';
import { staticCredential } from '../../src/api/credentials.ts';
import { createAlerter } from '../../src/alerts/alerter.ts';
import type { AuditLog } from '../../src/audit/events.ts';
import { createAuditLog } from '../../src/audit/logger.ts';
import { Secret } from '../../src/audit/secret.ts';
import type { Policy } from '../../src/policy/schema.ts';
import { createRuntime, type RuntimeOptions } from '../../src/rotation/runtime.ts';
import { runRotations, type RunSummary } from '../../src/rotation/run.ts';
import type { RunTrigger } from '../../src/rotation/types.ts';
import { wrapBackend } from '../rotation/harness.ts';
import { OWNER_TOKEN, type FaultBench } from './bench.ts';
import { isUsable, judgeCase } from './judge.ts';
import { markerHeldForSafety, NEXT_RUN_LATER_MS, resultOf, SETTLE_RUN_LATER_MS } from './run-case.ts';

/** One clock for every runner of the case; `pass` is time going by while a runner is frozen. */
interface CaseClock {
  now: () => Date;
  monotonicMs: () => number;
  pass(ms: number): void;
}

function caseClock(): CaseClock {
  let offsetMs = 0;
  return {
    now: () => new Date(Date.now() + offsetMs),
    monotonicMs: () => performance.now() + offsetMs,
    pass: (ms) => {
      offsetMs += ms;
    },
  };
}

interface Frozen {
  /** Resolves once the runner is frozen right before its write. */
  reached: Promise<void>;
  resume(): void;
  result: Promise<RunSummary>;
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** One runner (its own runtime, owner and backend instances) that freezes before its first write to the store. */
function runnerFrozenBeforeWrite(
  bench: FaultBench,
  policy: Policy,
  audit: AuditLog,
  clock: CaseClock,
  trigger: RunTrigger,
): Frozen {
  const reached = deferred();
  const resume = deferred();
  const result = runOnce(bench, policy, audit, { now: clock.now, monotonicMs: clock.monotonicMs }, trigger, {
    wrapBackend: (name, backend) =>
      name !== 'primary'
        ? backend
        : wrapBackend(backend, {
            writeSecret: async (next) => {
              reached.resolve();
              await resume.promise;
              return next();
            },
          }),
  });
  return { reached: reached.promise, resume: resume.resolve, result };
}

/** The next scheduled run, in-process, `laterMs` after the case clock. */
function laterRun(
  bench: FaultBench,
  policy: Policy,
  audit: AuditLog,
  clock: CaseClock,
  laterMs: number,
): Promise<RunSummary> {
  const later = {
    now: () => new Date(clock.now().getTime() + laterMs),
    monotonicMs: () => clock.monotonicMs() + laterMs,
  };
  return runOnce(bench, policy, audit, later, { reason: 'scheduled', force: false });
}

/** One run of the policy's keys by its own runtime (owner, backend instances), on the given clocks. */
async function runOnce(
  bench: FaultBench,
  policy: Policy,
  audit: AuditLog,
  clocks: Pick<CaseClock, 'now' | 'monotonicMs'>,
  trigger: RunTrigger,
  extra: Pick<RuntimeOptions, 'wrapBackend' | 'checkpoint'> = {},
): Promise<RunSummary> {
  const alerter = createAlerter({
    sinks: policy.alerts.sinks,
    audit,
    sleep: () => Promise.resolve(),
    retry: { attempts: 2, initialBackoffMs: 1, maxBackoffMs: 1 },
  });
  const runtime = await createRuntime(policy, {
    audit,
    alerter,
    credentials: staticCredential(new Secret(OWNER_TOKEN), 'fault-suite owner token'),
    sleep: () => Promise.resolve(),
    env: { ...bench.store.env },
    ...clocks,
    ...extra,
  });
  try {
    return await runRotations(runtime, { keys: policy.keys, trigger, concurrency: 1 });
  } finally {
    await runtime.close();
  }
}

export async function runOldHolderResumesFirst(ctx: TestContext, bench: FaultBench): Promise<void> {
  const name = `lock taken over, old holder resumes before the new holder writes (${bench.kind})`;
  const key = await bench.newKey(name);
  const lines: string[] = [];
  const audit = createAuditLog({ destination: { write: (line: string) => void lines.push(line) } });
  const bodiesBefore = bench.receiver.requests.length;
  const policy = bench.policy([key], { safetyNet: 'none', sinkUrl: `${bench.receiver.url}/alerts` });
  const keyPolicy = policy.keys[0];
  if (keyPolicy === undefined) throw new Error('the case policy has no key');
  const clock = caseClock();

  // A: a leak rotation rolls, then freezes before its write.
  const a = runnerFrozenBeforeWrite(bench, policy, audit, clock, {
    reason: 'leak',
    force: true,
    actor: 'runner-a',
  });
  await a.reached;
  // Frozen past its lock by everyone's clock, the store's included.
  clock.pass(keyPolicy.lockTtlMs + keyPolicy.clockSkewMs + 1_000);
  // B: the next scheduled run takes the lock over, finds A's marker and the stored secret dead
  // (A's roll killed it), re-rolls (A's secret dies), and freezes before its write.
  const b = runnerFrozenBeforeWrite(bench, policy, audit, clock, { reason: 'scheduled', force: false });
  await b.reached;
  // A resumes first and writes; then B.
  a.resume();
  const byA = await a.result;
  b.resume();
  const byB = await b.result;
  const stored = (await bench.store.direct.readSecret(key.target))?.secret.reveal();
  const usableAfterFault = isUsable(await bench.copiesOf(key), bench.emulator);
  const stateAfterFault = await bench.store.direct.readState(key.target);

  const linesBeforeNext = lines.length;
  const runs: RunSummary[] = [byA, byB, await laterRun(bench, policy, audit, clock, NEXT_RUN_LATER_MS)];
  let stateAfterNext = await bench.store.direct.readState(key.target);
  if (markerHeldForSafety(stateAfterNext.intent, lines.slice(linesBeforeNext))) {
    runs.push(await laterRun(bench, policy, audit, clock, SETTLE_RUN_LATER_MS));
    stateAfterNext = await bench.store.direct.readState(key.target);
  }
  const afterNext = await bench.copiesOf(key);
  const verdict = judgeCase({
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
    alertBodies: bench.receiver.requests.slice(bodiesBefore).map((r) => r.raw),
    otherOutput: [JSON.stringify(runs), ...(await bench.leftovers(key))],
    emulator: bench.emulator,
  });
  if (process.env.KEYROLL_FAULTS_DEBUG) for (const line of lines) process.stderr.write(line);
  verdict.record(ctx, {
    case: name,
    fault: 'lock taken over; the old holder resumes first',
    backend: bench.kind,
    step: 'store',
    result: resultOf(byA, key.keyId),
  });

  verdict.assertInvariants();
  // The old holder landed nothing: its write was refused for the lock it lost.
  expect(byA.outcomes[0], 'the old holder').toMatchObject({
    result: 'failed',
    step: 'store',
    errorCode: 'KR_LOCK_LOST',
  });
  // The new holder was entitled to its write and got it: its secret is the stored one, and it works.
  expect(byB.outcomes[0]?.result, 'the new holder').toMatch(/^(rotated|recovered)$/);
  expect(
    stored !== undefined && bench.emulator.state.isLiveSecret(key.keyId, stored),
    "the new holder's secret is stored and live",
  ).toBe(true);
  expect(
    lines.some(
      (line) => line.includes('"event":"key.stored"') && line.includes(byB.outcomes[0]?.rotationId ?? '-'),
    ),
    "the new holder's write landed",
  ).toBe(true);
}

/**
 * Issue 27 §2 (AWS): runner A holds the key lock and waits right before its roll; someone who may
 * only tag the secret copies the owner and rotation of A's intent marker into
 * `keyroll:lock-released`; runner B (a leak rotation) comes. The mark must not free A's lock: B
 * finds the key busy and audits the forgery, A rolls once and stores, nothing is lost.
 */
export async function runForgedReleaseTag(
  ctx: TestContext,
  bench: FaultBench,
  forge: (path: string) => Promise<void>,
): Promise<void> {
  const name = `forged lock release tag while the holder is about to roll (${bench.kind})`;
  const key = await bench.newKey(name);
  const lines: string[] = [];
  const audit = createAuditLog({ destination: { write: (line: string) => void lines.push(line) } });
  const bodiesBefore = bench.receiver.requests.length;
  const policy = bench.policy([key], { safetyNet: 'none', sinkUrl: `${bench.receiver.url}/alerts` });
  const clock = caseClock();
  const clocks = { now: clock.now, monotonicMs: clock.monotonicMs };

  const reached = deferred();
  const resume = deferred();
  const byAPromise = runOnce(
    bench,
    policy,
    audit,
    clocks,
    { reason: 'leak', force: true, actor: 'runner-a' },
    {
      checkpoint: async (step) => {
        if (step !== 'roll') return;
        reached.resolve();
        await resume.promise;
      },
    },
  );
  await reached.promise;
  await forge(key.target.path);
  const linesBeforeB = lines.length;
  const byB = await runOnce(bench, policy, audit, clocks, { reason: 'leak', force: true, actor: 'runner-b' });
  const linesOfB = lines.slice(linesBeforeB);
  resume.resolve();
  const byA = await byAPromise;
  const usableAfterFault = isUsable(await bench.copiesOf(key), bench.emulator);
  const stateAfterFault = await bench.store.direct.readState(key.target);

  const runs: RunSummary[] = [byA, byB, await laterRun(bench, policy, audit, clock, NEXT_RUN_LATER_MS)];
  const stateAfterNext = await bench.store.direct.readState(key.target);
  const verdict = judgeCase({
    keys: [
      {
        keyId: key.keyId,
        usableAfterFault,
        intentAfterFault: stateAfterFault.intent !== undefined,
        usableAfterNext: isUsable(await bench.copiesOf(key), bench.emulator),
        intentAfterNext: stateAfterNext.intent !== undefined,
      },
    ],
    runs,
    auditLines: lines,
    alertBodies: bench.receiver.requests.slice(bodiesBefore).map((r) => r.raw),
    otherOutput: [JSON.stringify(runs), ...(await bench.leftovers(key))],
    emulator: bench.emulator,
  });
  if (process.env.KEYROLL_FAULTS_DEBUG) for (const line of lines) process.stderr.write(line);
  verdict.record(ctx, {
    case: name,
    fault: 'keyroll:lock-released copied from the intent marker by a tag-only principal',
    backend: bench.kind,
    step: 'lock',
    result: resultOf(byB, key.keyId),
  });

  verdict.assertInvariants();
  expect(byB.outcomes[0], 'runner B').toMatchObject({ result: 'busy' });
  expect(byA.outcomes[0], 'runner A').toMatchObject({ result: 'rotated' });
  expect(bench.emulator.state.rollCount(key.keyId), "one roll: A's").toBe(1);
  expect(
    linesOfB.some(
      (line) => line.includes('"event":"key.record.distrusted"') && line.includes('"problem":"forged"'),
    ),
    'the forged mark is audited',
  ).toBe(true);
}
