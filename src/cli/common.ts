// Pieces every rotating command shares: loading the policy (exit 2 on any error, before
// anything is touched), the audit log on stdout, shutdown signals, and the summary line.
import type { Command } from 'commander';
import { createAuditLog } from '../audit/logger.ts';
import { KeyrollError, errorMessage } from '../errors.ts';
import { loadPolicy } from '../policy/load.ts';
import type { Policy } from '../policy/schema.ts';
import type { RunSummary } from '../rotation/run.ts';
import { ExitCode } from './exit-codes.ts';

export const DEFAULT_POLICY = process.env.KEYROLL_POLICY ?? 'policy.yaml';

export function addPolicyOption(command: Command): Command {
  return command.option('-p, --policy <file>', 'rotation policy (YAML or JSON); env KEYROLL_POLICY', DEFAULT_POLICY);
}

/** A configuration error: printed as one plain message, exit 2. */
export class UsageError extends KeyrollError {
  override name = 'UsageError';
  constructor(message: string) {
    super('KR_USAGE', message);
  }
}

export async function loadPolicyOrExit(file: string): Promise<Policy> {
  return loadPolicy(file);
}

export function createStdoutAudit(): ReturnType<typeof createAuditLog> {
  return createAuditLog({ destination: process.stdout });
}

/** Aborts on the first SIGTERM/SIGINT; rotations past their roll still finish their store. */
export function shutdownSignal(): { signal: AbortSignal; dispose: () => void } {
  const controller = new AbortController();
  const onSignal = (name: string): void => {
    if (!controller.signal.aborted) {
      process.stderr.write(`keyroll: ${name} received; finishing in-flight stores, starting no new rotations\n`);
      controller.abort(new Error(`${name} received`));
    }
  };
  const onTerm = (): void => { onSignal('SIGTERM'); };
  const onInt = (): void => { onSignal('SIGINT'); };
  process.on('SIGTERM', onTerm);
  process.on('SIGINT', onInt);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGTERM', onTerm);
      process.off('SIGINT', onInt);
    },
  };
}

export function summaryLine(summary: RunSummary): string {
  const tail = summary.aborted ? ` (aborted: ${summary.aborted.message})` : '';
  return `rotated ${summary.rotated}, failed ${summary.failed}, skipped ${summary.skipped}${tail}`;
}

/** Maps an error escaping a command to its exit code, printing one line (never a secret). */
export function exitForError(error: unknown): ExitCode {
  const code = error instanceof KeyrollError ? error.code : undefined;
  process.stderr.write(`keyroll: ${errorMessage(error)}\n`);
  if (code?.startsWith('KR_POLICY') || code === 'KR_USAGE' || code === 'KR_REF_UNRESOLVED') return ExitCode.config;
  return ExitCode.aborted;
}
