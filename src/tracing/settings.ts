// Which OpenTelemetry environment variables switch tracing on, and what keyroll takes from them
// (docs/tracing.md has the table). Tracing is off unless the environment asks for it: an OTLP
// endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), or
// OTEL_TRACES_EXPORTER=otlp. OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none keep it off
// whatever else is set. An empty variable counts as unset, as the specification says.
// The endpoint, headers, timeout and compression are read by the OTLP exporter itself; the rest
// is read here, since the SDK's trace package no longer reads the environment.
import { collectorCredentials, plainHttpCredentialWarning } from './collector-credentials.ts';

export type OtlpProtocol = 'http/protobuf' | 'http/json';

export type SamplerName =
  | 'always_on'
  | 'always_off'
  | 'traceidratio'
  | 'parentbased_always_on'
  | 'parentbased_always_off'
  | 'parentbased_traceidratio';

export interface BatchSettings {
  scheduledDelayMillis: number;
  exportTimeoutMillis: number;
  maxQueueSize: number;
  maxExportBatchSize: number;
}

export interface TracingOn {
  on: true;
  protocol: OtlpProtocol;
  sampler: { name: SamplerName; ratio: number };
  batch: BatchSettings;
  /** The longest a flush may wait for the collector (the exporter's own timeout). */
  exportTimeoutMs: number;
  /** `service.name` unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name one. */
  defaultServiceName: string;
  /** A CI job's or scheduler's span, for one-shot runs to join (W3C trace context). */
  traceparent?: string;
  tracestate?: string;
  /** OpenTelemetry's own diagnostics on stderr from this level up (OTEL_LOG_LEVEL; default warn). */
  logLevel: 'none' | 'error' | 'warn' | 'info' | 'debug';
  /**
   * Every part of what authenticates keyroll to the collector (header values, a token after its
   * scheme, a URL's user, password and query values): secrets to blank (collector-credentials.ts).
   */
  credentials: string[];
  warnings: string[];
}

export interface TracingOff {
  on: false;
  warnings: string[];
}

export type TracingSettings = TracingOn | TracingOff;

const SAMPLERS: readonly SamplerName[] = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
];
const LOG_LEVELS: readonly TracingOn['logLevel'][] = ['none', 'error', 'warn', 'info', 'debug'];

/** The batch span processor's defaults (OpenTelemetry's specification). */
export const BATCH_DEFAULTS: BatchSettings = {
  scheduledDelayMillis: 5000,
  exportTimeoutMillis: 30_000,
  maxQueueSize: 2048,
  maxExportBatchSize: 512,
};
/** OTLP exporters' default timeout. */
export const EXPORT_TIMEOUT_DEFAULT_MS = 10_000;

function read(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === undefined || value === '' ? undefined : value;
}

function number(env: NodeJS.ProcessEnv, name: string, fallback: number, warnings: string[], min = 0): number {
  const text = read(env, name);
  if (text === undefined) return fallback;
  const value = Number(text);
  if (Number.isFinite(value) && value >= min) return value;
  warnings.push(
    `${name}=${JSON.stringify(text)} is not a number of at least ${String(min)}; using ${String(fallback)}`,
  );
  return fallback;
}

export function tracingSettings(env: NodeJS.ProcessEnv): TracingSettings {
  const warnings: string[] = [];
  if (read(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return { on: false, warnings };
  const exporters = read(env, 'OTEL_TRACES_EXPORTER')
    ?.split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '');
  if (exporters?.includes('none')) return { on: false, warnings };
  const others = exporters?.filter((name) => name !== 'otlp') ?? [];
  if (others.length > 0)
    warnings.push(`OTEL_TRACES_EXPORTER names ${others.join(', ')}: keyroll exports traces over OTLP only`);
  const endpoint =
    read(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') ?? read(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
  const asked = exporters === undefined ? endpoint !== undefined : exporters.includes('otlp');
  if (!asked) return { on: false, warnings };

  const protocolText = (
    read(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ??
    read(env, 'OTEL_EXPORTER_OTLP_PROTOCOL') ??
    'http/protobuf'
  ).toLowerCase();
  if (protocolText !== 'http/protobuf' && protocolText !== 'http/json') {
    warnings.push(
      `OTLP protocol ${JSON.stringify(protocolText)} is not supported (keyroll sends http/protobuf or http/json, port 4318 by default): tracing stays off`,
    );
    return { on: false, warnings };
  }

  const sampler = samplerOf(env, warnings);
  const batch = batchOf(env, warnings);
  const exportTimeoutMs = number(
    env,
    'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT',
    number(env, 'OTEL_EXPORTER_OTLP_TIMEOUT', EXPORT_TIMEOUT_DEFAULT_MS, warnings),
    warnings,
  );

  const levelText = read(env, 'OTEL_LOG_LEVEL')?.toLowerCase() ?? 'warn';
  const logLevel =
    LOG_LEVELS.find((level) => level === levelText) ??
    (levelText === 'all' || levelText === 'verbose' ? 'debug' : 'warn');

  const traceparent = read(env, 'TRACEPARENT');
  const tracestate = read(env, 'TRACESTATE');
  return {
    on: true,
    protocol: protocolText,
    sampler,
    batch,
    exportTimeoutMs,
    defaultServiceName: 'keyroll',
    ...(traceparent === undefined ? {} : { traceparent }),
    ...(tracestate === undefined ? {} : { tracestate }),
    logLevel,
    credentials: collectorCredentials(env),
    warnings: [...warnings, ...[plainHttpCredentialWarning(env)].filter((warning) => warning !== undefined)],
  };
}

/** OTEL_TRACES_SAMPLER and its argument; an unknown sampler or ratio falls back with a warning. */
function samplerOf(env: NodeJS.ProcessEnv, warnings: string[]): { name: SamplerName; ratio: number } {
  const samplerText = read(env, 'OTEL_TRACES_SAMPLER')?.toLowerCase() ?? 'parentbased_always_on';
  let samplerName = SAMPLERS.find((name) => name === samplerText);
  if (samplerName === undefined) {
    warnings.push(
      `OTEL_TRACES_SAMPLER=${JSON.stringify(samplerText)} is not one keyroll knows (${SAMPLERS.join(', ')}); using parentbased_always_on`,
    );
    samplerName = 'parentbased_always_on';
  }
  let ratio = 1;
  if (samplerName.endsWith('traceidratio')) {
    ratio = number(env, 'OTEL_TRACES_SAMPLER_ARG', 1, warnings);
    if (ratio > 1) {
      warnings.push(`OTEL_TRACES_SAMPLER_ARG=${String(ratio)} is above 1; using 1`);
      ratio = 1;
    }
  }
  return { name: samplerName, ratio };
}

/** The OTEL_BSP_* batch settings; a batch is never larger than the queue. */
function batchOf(env: NodeJS.ProcessEnv, warnings: string[]): BatchSettings {
  const maxQueueSize = number(env, 'OTEL_BSP_MAX_QUEUE_SIZE', BATCH_DEFAULTS.maxQueueSize, warnings, 1);
  return {
    scheduledDelayMillis: number(
      env,
      'OTEL_BSP_SCHEDULE_DELAY',
      BATCH_DEFAULTS.scheduledDelayMillis,
      warnings,
    ),
    exportTimeoutMillis: number(env, 'OTEL_BSP_EXPORT_TIMEOUT', BATCH_DEFAULTS.exportTimeoutMillis, warnings),
    maxQueueSize,
    maxExportBatchSize: Math.min(
      maxQueueSize,
      number(env, 'OTEL_BSP_MAX_EXPORT_BATCH_SIZE', BATCH_DEFAULTS.maxExportBatchSize, warnings, 1),
    ),
  };
}
