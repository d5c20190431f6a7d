// The part `run` and `rotate` share once they know which keys and why: the output (the audit
// trail as JSON lines when stdout is not a terminal, a progress view when it is; terminal/),
// shutdown signals, the optional Pushgateway export, the run itself, the refresh of the consumers
// of what it stored (src/consumers/: webhooks as each key ends, syncs and restarts after the run),
// and the summary line last.
// This module is itself loaded only by those two commands (a dynamic import, after the flags), so
// the rotation engine is imported statically here: one round of module loading on the way to the
// first roll, not two.
import type { AuditLog } from '../audit/public/events.ts';
import { printableLines } from '../audit/public/printable.ts';
import { createRefresher } from '../consumers/public/create.ts';
import { keyRecordsOf } from '../consumers/public/key-records.ts';
import {
  consumersSummaryPart,
  runConsumersReport,
  type RunConsumersReport,
} from '../consumers/public/report.ts';
import type { KeyrollMetrics } from '../metrics/public/metrics.ts';
import type { PushgatewayExport } from '../metrics/public/run-export.ts';
import { announcePlainHttp } from '../policy/public/plain-http-notice.ts';
import type { KeyPolicy, Policy } from '../policy/public/schema.ts';
import { createRuntime, type Runtime } from '../rotation/public/runtime.ts';
import { runRotations, type RunSummary } from '../rotation/public/run.ts';
import type { RunTrigger } from '../rotation/public/types.ts';
import { ExitCode } from './exit-codes.ts';
import {
  exitCodeAfterShutdown,
  exitForError,
  shutdownSignal,
  summaryLine,
  testCheckpointFromEnv,
} from './common.ts';
import type { OutputFlags } from './terminal/output-mode.ts';
import { openRunOutput, type RunOutput } from './terminal/run-output.ts';

export interface ExecuteRunInput {
  policy: Policy;
  keys: readonly KeyPolicy[];
  trigger: RunTrigger;
  concurrency: number;
  command: 'run' | 'rotate';
  pushgateway?: PushgatewayExport;
  /** Pushgateway grouping labels besides the job. */
  groupings: Readonly<Record<string, string>>;
  /** `run --shard i/N`: N runners spend the same backend quotas at once (each paces at 1/N). */
  shards?: number;
  /** Two-slot entries named by one of their slots (`rotate --key <slot>`): entry id → slot. */
  slots?: ReadonlyMap<string, string>;
  /** Extra output after the audit trail and before the summary line (rotate -o json); `consumers` as on the summary line. */
  report?: (summary: RunSummary, consumers: RunConsumersReport | undefined) => string | undefined;
  /** `--log-format`, `--audit-file` (terminal/output-mode.ts). */
  output?: OutputFlags;
  /** Audit lines that belong before the run, on its output (rotate --leaked-secret-stdin: leak.identified). */
  onStart?: (audit: AuditLog) => void;
  /**
   * Work after the rotations, with the run's runtime still open (rotate --leaked-secret-stdin
   * proves the leaked value dead here); not called when a shutdown signal interrupted the run.
   * An exit code it returns replaces the run's when higher. `metrics` is the run's Pushgateway
   * export, when there is one (pushed after this work).
   */
  afterRotations?: (
    runtime: Runtime,
    summary: RunSummary,
    metrics: KeyrollMetrics | undefined,
  ) => Promise<RunSummary['exitCode'] | undefined>;
}

// eslint-disable-next-line max-lines-per-function -- a linear command body (open output, runtime, rotate, deliver, push, flush, exit code) under one try/finally that closes what it opened
export async function executeRun(input: ExecuteRunInput): Promise<number> {
  let output: RunOutput;
  try {
    // Before anything is touched: an audit file that cannot be opened is a usage error (exit 2).
    output = await openRunOutput(
      input.output ?? {},
      input.keys.map((key) => key.id),
    );
  } catch (error) {
    return exitForError(error);
  }
  const { audit } = output;
  announcePlainHttp([...(input.policy.plainHttp ?? []), ...(input.pushgateway?.plainHttp ?? [])], audit);
  input.onStart?.(audit);
  const metrics = input.pushgateway?.start(input.policy, audit, input.trigger.reason);
  const shutdown = shutdownSignal();
  let runtime;
  try {
    const checkpoint = testCheckpointFromEnv();
    runtime = await createRuntime(input.policy, {
      audit,
      ...metrics?.runtimeOptions,
      ...(checkpoint ? { checkpoint } : {}),
      ...(input.shards ? { shards: input.shards } : {}),
    });
    const refresher = createRefresher(input.policy, {
      alerter: runtime.alerter,
      notifier: runtime.notifier,
      signal: shutdown.signal,
      ...(metrics ? { observer: metrics.metrics.consumerObserver } : {}),
    });
    const delivery = refresher.begin(audit, input.policy.keys);
    const keysById = new Map(input.keys.map((key) => [key.id, key]));
    const summary = await runRotations(runtime, {
      keys: input.keys,
      trigger: input.trigger,
      concurrency: input.concurrency,
      signal: shutdown.signal,
      onKeyDone: (outcome) => {
        output.keyDone(outcome);
        metrics?.onKeyDone(outcome);
        const key = keysById.get(outcome.keyId);
        if (key !== undefined) delivery.stored(key, outcome);
      },
      // A single key's webhook consumers hear of it at the store (invariant 12); finish waits for it.
      onKeyStored: (outcome) => {
        const key = keysById.get(outcome.keyId);
        if (key !== undefined) delivery.storedBeforeVerify(key, outcome);
      },
      command: input.command,
      ...(input.slots ? { slots: input.slots } : {}),
    });
    // Every key of the run is stored: its consumers now, and restarts still owed from earlier runs
    // (one queue: a workload owed by both restarts once). Both are the run's: on its summary line,
    // in its JSON report and in its exit code. A failed consumer never changes a rotation; it
    // makes the run exit 1 (docs/exit-codes.md).
    const [delivered, pickedUp] = await Promise.all([
      delivery.finish(),
      refresher.pickUpOwed(
        input.policy.keys,
        audit,
        keyRecordsOf(runtime, () => new Date()),
      ),
    ]);
    const consumers = runConsumersReport(delivered, pickedUp);
    // Read at once: a signal after this point (during the push or the flush) finds a finished run.
    const interruptedBy = shutdown.signal.aborted ? signalName(shutdown.signal) : undefined;
    output.finishView();
    const after =
      interruptedBy === undefined
        ? await input.afterRotations?.(runtime, summary, metrics?.metrics)
        : undefined;
    await metrics?.push(input.groupings);
    await audit.flush();
    const consumersFailed =
      consumers !== undefined && consumers.failed > 0 ? ExitCode.someFailed : ExitCode.ok;
    const exitCode = Math.max(
      exitCodeAfterShutdown(summary, interruptedBy !== undefined),
      after ?? 0,
      consumersFailed,
    ) as RunSummary['exitCode'];
    const report = input.report?.({ ...summary, exitCode }, consumers);
    if (report !== undefined) process.stdout.write(`${printableLines(report)}\n`);
    process.stdout.write(`${summaryLine(summary, interruptedBy)}${consumersSummaryPart(consumers)}\n`);
    return exitCode;
  } catch (error) {
    output.finishView();
    return exitForError(error);
  } finally {
    shutdown.dispose();
    await runtime?.close();
    output.close();
  }
}

/** "SIGTERM received" (the reason shutdownSignal aborts with), or a plain word. */
function signalName(signal: AbortSignal): string {
  return signal.reason instanceof Error ? signal.reason.message : 'a shutdown signal';
}
