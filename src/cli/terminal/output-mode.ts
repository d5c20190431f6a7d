// What `run`, `rotate` and `demo` print, decided once from the flags, the environment and whether
// stdout is a terminal. Machines (a pod's log, a pipe to jq, a log shipper) get the audit trail as
// JSON lines on stdout exactly as before; a person at a terminal gets a per-key progress view and
// the summary, and the trail only when asking for it (`--log-format`, `--audit-file`).
import { Option, type Command } from 'commander';

export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export const isLogFormat = (value: unknown): value is LogFormat =>
  (LOG_FORMATS as readonly unknown[]).includes(value);

export interface OutputFlags {
  logFormat?: LogFormat;
  auditFile?: string;
}

export interface OutputMode {
  /** The audit trail on stdout: JSON lines, pino-pretty's text, or nothing (the view instead). */
  trail: 'json' | 'pretty' | 'none';
  /** The progress view: redrawn in place (`live`), appended lines only (`lines`: TERM=dumb), or none. */
  view: 'live' | 'lines' | 'none';
  /** ANSI colours in the view and the pretty trail. */
  color: boolean;
  /** The older per-key counter on stderr: stdout is piped but a person watches stderr. */
  stderrCounter: boolean;
  /** JSON lines appended to this file (0600), whatever stdout shows. */
  auditFile?: string;
}

export interface TerminalFacts {
  stdoutIsTTY: boolean;
  stderrIsTTY: boolean;
  env: NodeJS.ProcessEnv;
}

export function addOutputOptions(command: Command): Command {
  return command
    .addOption(
      new Option(
        '--log-format <format>',
        'the audit trail on stdout: auto (JSON lines when stdout is not a terminal, a progress view when it is), json, or pretty; env KEYROLL_LOG_FORMAT',
      )
        .choices(LOG_FORMATS)
        // An unknown value from the environment reaches openRunOutput, which refuses it (exit 2).
        .default(process.env.KEYROLL_LOG_FORMAT ?? 'auto'),
    )
    .option(
      '--audit-file <path>',
      'also append the audit trail as JSON lines to this file (created 0600); env KEYROLL_AUDIT_FILE',
      process.env.KEYROLL_AUDIT_FILE,
    );
}

/** `NO_COLOR` (no-color.org: set and not empty) and `TERM=dumb` turn colours off. */
export function colorWanted(isTTY: boolean, env: NodeJS.ProcessEnv): boolean {
  if (!isTTY) return false;
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  return env.TERM !== 'dumb';
}

export function resolveOutputMode(flags: OutputFlags, facts: TerminalFacts): OutputMode {
  const format = flags.logFormat ?? 'auto';
  const color = colorWanted(facts.stdoutIsTTY, facts.env);
  const auditFile =
    flags.auditFile === undefined || flags.auditFile === '' ? {} : { auditFile: flags.auditFile };
  if (format === 'auto' && facts.stdoutIsTTY) {
    // A dumb terminal cannot move its cursor: finished keys are appended, nothing is redrawn.
    return {
      trail: 'none',
      view: facts.env.TERM === 'dumb' ? 'lines' : 'live',
      color,
      stderrCounter: false,
      ...auditFile,
    };
  }
  const trail = format === 'pretty' ? 'pretty' : 'json';
  // When stdout is the terminal, the trail asked for is itself the progress: no counter on top.
  return { trail, view: 'none', color, stderrCounter: !facts.stdoutIsTTY && facts.stderrIsTTY, ...auditFile };
}
