// The audit log on pino: one JSON line per catalogue event, the rotation context on every line,
// and two layers that keep secrets out (invariant 3):
//   1. `redact` paths blank fields that must never hold a value, whatever an emitter puts there;
//   2. `hooks.streamWrite` runs every finished line through `sanitizeText`, which blanks every
//      secret this process knows (and its encoded forms, base64 runs that decode to text holding
//      it, and a cut-off copy; docs/sanitizer.md), so a secret that slipped into an error message
//      or a plain string field is caught as well.
import { hostname } from 'node:os';
import { pino, type DestinationStream, type Logger } from 'pino';
import { KeyrollError } from '../errors.ts';
import type { AuditContext, AuditEventName, AuditLog } from './events.ts';
import { AUDIT_EVENT_LEVELS } from './levels.ts';
import { escapeJsonText } from './printable.ts';
import { sanitizeText } from './sanitize.ts';
import { traceIdFields } from './trace-ids.ts';

/** The context fields, in the order they appear on a line. */
export const AUDIT_CONTEXT_KEYS = [
  'runId',
  'rotationId',
  'keyId',
  'organizationId',
  'actor',
  'reason',
  'ticket',
] as const;

// Field names that must never carry a value in an audit line. Each is censored at the top level
// and one level down (`*.name`, e.g. `headers.authorization`, `request.token`); request headers
// are also covered one level deeper (`*.headers.name`, e.g. `error.headers.authorization`).
// Emitters pass fingerprints (`fingerprint`), never these; the paths catch mistakes.
const REDACTED_FIELD_NAMES = [
  'authorization',
  'Authorization',
  'cookie',
  'token',
  'secret',
  'apiKey',
  'key',
  'password',
  'routingKey',
  'webhookUrl',
  'x-api-key',
] as const;

function redactPath(prefix: string, name: string): string {
  const segment = /^[A-Za-z_$][\w$]*$/.test(name) ? `.${name}` : `["${name}"]`;
  return prefix === '' ? segment.replace(/^\./, '') : `${prefix}${segment}`;
}

/** The pino `redact` paths (documented in docs/audit-events.md). */
export const AUDIT_REDACT_PATHS: readonly string[] = REDACTED_FIELD_NAMES.flatMap((name) => [
  redactPath('', name),
  redactPath('*', name),
  ...(name === 'authorization' || name === 'Authorization' || name === 'cookie' || name === 'x-api-key'
    ? [redactPath('*.headers', name)]
    : []),
]);

export const REDACTED_VALUE = '[REDACTED]';

export interface AuditLogOptions {
  /** Where lines go; stdout (synchronous writes) when omitted. */
  destination?: DestinationStream | NodeJS.WritableStream;
  /** Lowest level written: `debug`, `info` (default), `warn` or `error`; else KEYROLL_AUDIT_LEVEL. */
  level?: string;
  /** Context carried by every event of this log (e.g. the run id of a one-shot run). */
  base?: AuditContext;
  /** Clock for the `time` field (tests inject one). */
  now?: () => number;
}

export type FlushableAuditLog = AuditLog & { flush(): Promise<void> };

/** A parsed audit line, as the memory log keeps it. */
export type AuditRecord = AuditContext & {
  event: AuditEventName;
  level: string;
  time: string;
  msg: string;
  [field: string]: unknown;
};

const CONTEXT_KEY_SET: ReadonlySet<string> = new Set(AUDIT_CONTEXT_KEYS);

function definedContext(context: AuditContext | Record<string, unknown>): AuditContext {
  const picked: Record<string, unknown> = {};
  for (const name of AUDIT_CONTEXT_KEYS) {
    const value = (context as Record<string, unknown>)[name];
    if (value !== undefined) picked[name] = value;
  }
  return picked;
}

/**
 * Errors in audit lines: name, stable code and message (plus KeyrollError context fields), and
 * the cause chain. No stack: an audit line is read by people and SIEM rules, and a stack trace
 * is where an SDK would echo a request; messages are still sanitized by the stream hook.
 */
export function serializeAuditError(error: unknown, depth = 0): unknown {
  if (!(error instanceof Error)) return error;
  const fields: Record<string, unknown> =
    error instanceof KeyrollError
      ? { type: error.name, ...error.toFields() }
      : { type: error.name, errorMessage: error.message };
  const code = (error as { code?: unknown }).code;
  if (!(error instanceof KeyrollError) && typeof code === 'string') fields.errorCode = code;
  if (error.cause !== undefined && depth < 3) fields.cause = serializeAuditError(error.cause, depth + 1);
  return fields;
}

const AUDIT_LEVELS: ReadonlySet<string> = new Set(['debug', 'info', 'warn', 'error']);

/** KEYROLL_AUDIT_LEVEL when it names a level (debug shows throttle answers waited out), else `info`. */
export function auditLevelFromEnv(env: NodeJS.ProcessEnv): string {
  const level = env.KEYROLL_AUDIT_LEVEL?.trim().toLowerCase();
  return level !== undefined && AUDIT_LEVELS.has(level) ? level : 'info';
}

function createPinoLogger(options: AuditLogOptions): Logger {
  const now = options.now ?? Date.now;
  const destination = options.destination ?? pino.destination({ dest: 1, sync: true });
  return pino(
    {
      level: options.level ?? auditLevelFromEnv(process.env),
      base: { pid: process.pid, hostname: hostname() },
      messageKey: 'msg',
      timestamp: () => `,"time":"${new Date(now()).toISOString()}"`,
      formatters: { level: (label) => ({ level: label }) },
      // The active span's trace and span ids when tracing is on (trace-ids.ts), nothing otherwise.
      mixin: traceIdFields,
      serializers: { err: serializeAuditError, error: serializeAuditError },
      redact: { paths: [...AUDIT_REDACT_PATHS], censor: REDACTED_VALUE },
      // Then DEL, C1 and bidi controls as \uXXXX escapes (pino escapes C0 itself): the same JSON once
      // parsed, and a trail read on a terminal (`kubectl logs`) cannot drive it.
      hooks: { streamWrite: (line) => escapeJsonText(sanitizeText(line)) },
    },
    // Synchronous stdout by default: an audit line emitted before a SIGKILL is on disk (invariant
    // 6 relies on the trail), and no buffered write can fire later inside the window between the
    // roll answer and the backend write (invariant 2).
    destination,
  );
}

function auditLogOn(root: Logger, context: AuditContext): AuditLog {
  const logger = root.child(context);
  return {
    emit(event: AuditEventName, fields: Record<string, unknown> = {}): void {
      const level = AUDIT_EVENT_LEVELS[event];
      // A context field passed in `fields` replaces the context for this line rather than
      // appearing twice in the JSON (pino does not merge bindings with log arguments).
      let target = logger;
      const rest: Record<string, unknown> = {};
      const overrides: Record<string, unknown> = {};
      for (const [name, value] of Object.entries(fields)) {
        if (CONTEXT_KEY_SET.has(name)) overrides[name] = value;
        else if (name !== 'event') rest[name] = value;
      }
      if (Object.keys(overrides).length > 0)
        target = root.child(definedContext({ ...context, ...overrides }));
      target[level]({ event, ...rest }, event);
    },
    child(extra: AuditContext): AuditLog {
      return auditLogOn(root, definedContext({ ...context, ...definedContext(extra) }));
    },
  };
}

/** The audit log of a keyroll process. */
export function createAuditLog(options: AuditLogOptions = {}): FlushableAuditLog {
  const root = createPinoLogger(options);
  const log = auditLogOn(root, definedContext(options.base ?? {}));
  return {
    ...log,
    flush: () =>
      new Promise<void>((resolve, reject) => {
        root.flush((error?: Error) => {
          if (error) reject(error);
          else resolve();
        });
      }),
  };
}

/** An audit log that drops everything (commands that need none, and tests that ignore it). */
export function createNullAuditLog(): AuditLog {
  const log: AuditLog = {
    emit: () => undefined,
    child: () => log,
  };
  return log;
}

export type MemoryAuditLog = FlushableAuditLog & {
  /** Every line written so far, parsed, after redaction and sanitizing. */
  readonly events: AuditRecord[];
  /** The raw lines, as they would reach stdout. */
  readonly lines: string[];
  /** Events with the given name. */
  eventsNamed(event: AuditEventName): AuditRecord[];
  clear(): void;
};

/** An audit log that keeps its lines in memory for tests; same pipeline as the real one. */
export function createMemoryAuditLog(options: Omit<AuditLogOptions, 'destination'> = {}): MemoryAuditLog {
  const events: AuditRecord[] = [];
  const lines: string[] = [];
  const log = createAuditLog({
    ...options,
    destination: {
      write(line: string): void {
        lines.push(line);
        events.push(JSON.parse(line) as AuditRecord);
      },
    },
  });
  return {
    ...log,
    events,
    lines,
    eventsNamed: (event) => events.filter((record) => record.event === event),
    clear: () => {
      events.length = 0;
      lines.length = 0;
    },
  };
}
