// Pieces every rotating command shares: loading the policy (exit 2 on any error, before
// anything is touched), the audit log on stdout, shutdown signals, and the summary line.
import { InvalidArgumentError, type Command } from 'commander';
import { printable, printableLines } from '../audit/public/printable.ts';
import { createAuditLog } from '../audit/public/logger.ts';
import type { ErrorCode } from '../error-codes.ts';
import { sanitizeText } from '../audit/public/sanitize.ts';
import { KeyrollError, errorMessage } from '../errors.ts';
import { loadPolicy } from '../policy/public/load.ts';
import type { Policy } from '../policy/public/schema.ts';
import type { RunSummary } from '../rotation/public/run.ts';
import { ExitCode } from './exit-codes.ts';
import { abandonDeliveriesOn, SHUTDOWN_WINDOW_MS } from '../alerts/public/shutdown.ts';

export const DEFAULT_POLICY = process.env.KEYROLL_POLICY ?? 'policy.yaml';

export function addPolicyOption(command: Command): Command {
  return command.option(
    '-p, --policy <file>',
    'rotation policy (YAML or JSON); env KEYROLL_POLICY',
    DEFAULT_POLICY,
  );
}

/**
 * Starts loading the policy. Commands may start it before loading their own modules and await it
 * later: its error then surfaces where it is awaited (exit 2), never as an unhandled rejection
 * meanwhile.
 */
export function loadPolicyOrExit(file: string): Promise<Policy> {
  const loading = loadPolicy(file);
  loading.catch(() => undefined);
  return loading;
}

export function createStdoutAudit(): ReturnType<typeof createAuditLog> {
  return createAuditLog({ destination: process.stdout });
}

/**
 * Aborts on the first SIGTERM/SIGINT; rotations past their roll still finish their store. Alert
 * and notification deliveries get SHUTDOWN_WINDOW_MS more, whatever the sink does, then are
 * abandoned (audited as undelivered), so the process ends within the pod's grace period.
 */
export function shutdownSignal(): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const releaseAlerts = abandonDeliveriesOn(controller.signal);
  const onSignal = (name: string): void => {
    if (!controller.signal.aborted) {
      process.stderr.write(
        `keyroll: ${name} received; finishing in-flight stores, starting no new rotations, alerts get at most ${String(SHUTDOWN_WINDOW_MS / 1000)} s more\n`,
      );
      controller.abort(new Error(`${name} received`));
    }
  };
  const onTerm = (): void => {
    onSignal('SIGTERM');
  };
  const onInt = (): void => {
    onSignal('SIGINT');
  };
  process.on('SIGTERM', onTerm);
  process.on('SIGINT', onInt);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGTERM', onTerm);
      process.off('SIGINT', onInt);
      releaseAlerts();
    },
  };
}

export function summaryLine(summary: RunSummary, interruptedBy?: string): string {
  const why =
    summary.aborted?.message ??
    (interruptedBy === undefined ? undefined : `${interruptedBy} before the run finished`);
  const tail = why === undefined ? '' : ` (aborted: ${printable(sanitizeText(why))})`;
  return `rotated ${summary.rotated}, failed ${summary.failed}, skipped ${summary.skipped}${tail}`;
}

/**
 * The exit code of a run that a shutdown signal may have interrupted. The engine reports a
 * shutdown only when it left keys unstarted; a signal that arrived later (while a failed key's
 * alert was still being delivered, say) still stopped the run before it finished: exit 3, as
 * docs/exit-codes.md says for a shutdown before completion.
 */
export function exitCodeAfterShutdown(summary: RunSummary, interrupted: boolean): RunSummary['exitCode'] {
  return interrupted ? ExitCode.aborted : summary.exitCode;
}

/** Maps an error escaping a command to its exit code, printing one line (never a secret). */
/** The codes of an error in the configuration (exit 2): the policy, a flag, a reference. */
const CONFIG_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'KR_POLICY_UNREADABLE',
  'KR_POLICY_SYNTAX',
  'KR_POLICY_INVALID',
  'KR_USAGE',
  'KR_REF_UNRESOLVED',
]);

export function exitForError(error: unknown): ExitCode {
  const code = error instanceof KeyrollError ? error.code : undefined;
  // Messages never carry a secret by construction; the sanitizer is the second layer.
  process.stderr.write(`keyroll: ${printableLines(sanitizeText(errorMessage(error)))}\n`);
  if (code !== undefined && CONFIG_CODES.has(code)) return ExitCode.config;
  return ExitCode.aborted;
}

/**
 * Test-only pause points for the crash tests (docs/faults.md): with KEYROLL_TEST_PAUSE_AT=<step>
 * (preflight, lock, intent, roll, store, verify, finish), `run`, `rotate` and `daemon` print `keyroll: paused at <step>`
 * on stderr when it reaches that step and waits there until it is killed. There is deliberately
 * no pause point between the roll answer and the store (invariant 2); tests reach that window
 * by holding the roll answer in the emulator.
 */
export function testCheckpointFromEnv(
  env: NodeJS.ProcessEnv = process.env,
): ((step: string) => Promise<void>) | undefined {
  const pauseAt = env.KEYROLL_TEST_PAUSE_AT;
  if (!pauseAt) return undefined;
  return async (step) => {
    if (step !== pauseAt) return;
    process.stderr.write(`keyroll: paused at ${step}\n`);
    await new Promise<never>(() => {
      // Keeps the event loop alive until the test kills the process.
      setInterval(() => undefined, 60_000);
    });
  };
}

/** Commander parser for --concurrency: a NaN or zero would start no worker and rotate nothing. */
export function parseConcurrency(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > 256) {
    throw new InvalidArgumentError(`${JSON.stringify(value)} is not a whole number from 1 to 256`);
  }
  return n;
}
