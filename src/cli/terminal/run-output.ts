// Where the output of `run`, `rotate` and `demo` goes (output-mode.ts decides): the audit log's
// destination fans each finished line out to the audit file, the trail on stdout (JSON lines or
// pino-pretty) and the progress view. Every line reaching this fan-out has already been through
// pino's redact paths and the sanitizer (src/audit/logger.ts, hooks.streamWrite), so each sink
// gets the same sanitized bytes; the view sanitizes its own frames again before writing.
import { createAuditLog, type FlushableAuditLog } from '../../audit/public/logger.ts';
import { printable } from '../../audit/public/printable.ts';
import type { KeyOutcome } from '../../rotation/public/types.ts';
import { createProgressReporter } from './progress.ts';
import { openAuditFile, type AuditFileSink } from './audit-file.ts';
import { createProgressView, type ProgressView, type ViewStream } from './live-view.ts';
import { UsageError } from '../../errors.ts';
import {
  isLogFormat,
  LOG_FORMATS,
  resolveOutputMode,
  type OutputFlags,
  type OutputMode,
} from './output-mode.ts';

export interface RunOutputIo {
  stdout: ViewStream & { isTTY?: boolean };
  stderr: NodeJS.WriteStream | (ViewStream & { isTTY?: boolean });
  env: NodeJS.ProcessEnv;
}

export interface RunOutput {
  readonly mode: OutputMode;
  readonly audit: FlushableAuditLog;
  /** A key's outcome (the view's finished line, the stderr counter). */
  keyDone(outcome: KeyOutcome): void;
  /** Ends the view before the summary is printed; its finished lines stay. */
  finishView(): void;
  /** Closes the audit file, after the last audit line. */
  close(): void;
}

const defaultIo = (): RunOutputIo => ({ stdout: process.stdout, stderr: process.stderr, env: process.env });

/**
 * Opens the run's output: the audit file first (a path that cannot be opened is a usage error,
 * exit 2, before anything is touched), pino-pretty only when asked for.
 */
export async function openRunOutput(
  flags: OutputFlags,
  keyIds: readonly string[],
  io: RunOutputIo = defaultIo(),
): Promise<RunOutput> {
  if (flags.logFormat !== undefined && !isLogFormat(flags.logFormat)) {
    throw new UsageError(
      `--log-format (or KEYROLL_LOG_FORMAT) must be one of ${LOG_FORMATS.join(', ')}, not ${JSON.stringify(String(flags.logFormat))}`,
    );
  }
  const mode = resolveOutputMode(flags, {
    stdoutIsTTY: io.stdout.isTTY === true,
    stderrIsTTY: io.stderr.isTTY === true,
    env: io.env,
  });
  const file: AuditFileSink | undefined =
    mode.auditFile === undefined ? undefined : openAuditFile(mode.auditFile, (line) => io.stderr.write(line));
  const pretty = mode.trail === 'pretty' ? await loadPrettifier(mode.color) : undefined;
  const view: ProgressView | undefined =
    mode.view === 'none'
      ? undefined
      : createProgressView(io.stdout, { keyIds, mode: mode.view, color: mode.color });
  const counter = mode.stderrCounter
    ? createProgressReporter(keyIds.length, io.stderr as NodeJS.WriteStream)
    : undefined;
  const destination = {
    write(line: string): void {
      file?.write(line);
      if (mode.trail === 'json') io.stdout.write(line);
      else if (pretty) io.stdout.write(pretty(printableFields(line)));
      view?.auditLine(line);
    },
  };
  const audit = createAuditLog({ destination });
  return {
    mode,
    audit,
    keyDone(outcome) {
      view?.keyDone(outcome);
      counter?.keyDone(outcome);
    },
    finishView() {
      view?.finish();
      counter?.finish();
    },
    close() {
      file?.close();
    },
  };
}

/** pino-pretty's formatter for one line: loaded only for `--log-format pretty`. */
async function loadPrettifier(colorize: boolean): Promise<(line: string) => string> {
  // Through the CommonJS module's default export: the bundle's interop exposes no named ones.
  const { prettyFactory } = (await import('pino-pretty')).default;
  // The event name is the message (msg); pid and hostname tell runners apart in a shared log, not
  // on the terminal that started this one.
  return prettyFactory({
    colorize,
    ignore: 'pid,hostname,event,runId,rotationId,keyId,organizationId,actor,reason,ticket',
    messageFormat: '{if keyId}{keyId} {end}{msg}',
    translateTime: 'SYS:HH:MM:ss.l',
    singleLine: true,
  });
}

/**
 * The audit line with every string value (and name) made printable: pino-pretty writes values
 * unquoted, so an error message's escape sequence (JSON-escaped in the line) would reach the
 * terminal raw. A line that is not JSON is passed as is; pino-pretty prints it verbatim, and it
 * comes from keyroll's own logger.
 */
function printableFields(line: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch {
    return line;
  }
  const walk = (value: unknown): unknown => {
    if (typeof value === 'string') return printable(value);
    if (Array.isArray(value)) return value.map(walk);
    if (value === null || typeof value !== 'object') return value;
    const out: Record<string, unknown> = {};
    for (const [name, inner] of Object.entries(value))
      Object.defineProperty(out, printable(name), {
        value: walk(inner),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    return out;
  };
  return `${JSON.stringify(walk(parsed))}\n`;
}
