// The OpenTelemetry SDK behind keyroll's tracing API, started only when the OTEL_* variables ask
// for traces (../settings.ts): this folder is the only code that imports OpenTelemetry, and
// ../start.ts loads it with a dynamic import, so with tracing off none of it is loaded (cold
// start) and an install without the optional OpenTelemetry packages still runs.
//
//   spans → SanitizingSpanProcessor (sanitizer; hand-over on a later turn, invariants 2 and 3)
//         → BatchSpanProcessor (OTEL_BSP_*) → OTLP/HTTP exporter (protobuf or JSON; it reads
//           OTEL_EXPORTER_OTLP_* itself: endpoint, headers, timeout, compression)
// Context: AsyncLocalStorage with movable scopes (context-manager.ts), W3C trace context for the
// headers undici's instrumentation adds and for TRACEPARENT. HTTP client spans: undici's
// diagnostics channels (instrumentation-undici), which the bundled undici publishes on as well.
// AWS SDK spans: aws-sdk.ts.
import { context, diag, DiagLogLevel, propagation, type DiagLogger } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as ProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';
import {
  defaultResource,
  detectResources,
  resourceAttributesEnvDetector,
  resourceFromAttributes,
  serviceNameEnvDetector,
} from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import { sanitizeText } from '../../audit/public/sanitize.ts';
import type { TracingOn } from '../settings.ts';
import { instrumentAwsSdk } from './aws-sdk.ts';
import { ScopedContextManager } from './context-manager.ts';
import { SanitizingSpanProcessor } from './processor.ts';
import { OtelTracing } from './tracing.ts';

export interface OtelStartOptions {
  /** Writes one line for a person (stderr in the CLI); OpenTelemetry's own warnings and errors come here. */
  warn: (line: string) => void;
  /** Tests: export here instead of OTLP. */
  exporter?: SpanExporter;
  /** Tests: processors that see each span as it ends, before keyroll's own. */
  before?: SpanProcessor[];
}

export interface OtelRunning {
  tracing: OtelTracing;
  /** Hands over every span and waits for the export (at most the exporter's timeout). */
  flush(): Promise<void>;
  /** Flushes, then stops: the instrumentations unhooked, the global context and propagator given back. */
  shutdown(): Promise<void>;
}

function sampler(settings: TracingOn): Sampler {
  const { name, ratio } = settings.sampler;
  const root = name.endsWith('always_off')
    ? new AlwaysOffSampler()
    : name.endsWith('traceidratio')
      ? new TraceIdRatioBasedSampler(ratio)
      : new AlwaysOnSampler();
  return name.startsWith('parentbased_') ? new ParentBasedSampler({ root }) : root;
}

const DIAG_LEVELS: Record<TracingOn['logLevel'], DiagLogLevel> = {
  none: DiagLogLevel.NONE,
  error: DiagLogLevel.ERROR,
  warn: DiagLogLevel.WARN,
  info: DiagLogLevel.INFO,
  debug: DiagLogLevel.DEBUG,
};

/**
 * OpenTelemetry's own messages (an export that failed, a collector that refused) as sanitized lines.
 * A collector that stays down would repeat the same error every few seconds: each distinct message
 * is written once a minute at most.
 */
/** An argument of a diagnostic message as text: an error's message (a failed export passes a list of them), a string. */
function describe(arg: unknown): string {
  if (arg instanceof Error) return arg.message;
  if (typeof arg === 'string') return arg;
  return Array.isArray(arg)
    ? arg
        .map(describe)
        .filter((text) => text !== '')
        .join('; ')
    : '';
}

function diagLogger(warn: (line: string) => void): DiagLogger {
  const lastWritten = new Map<string, number>();
  const write =
    (level: string) =>
    (message: string, ...args: unknown[]) => {
      const details = args.map(describe).filter((text) => text !== '');
      const line = sanitizeText(`tracing ${level}: ${[message, ...details].join(' ')}`)
        .replace(/\s+/g, ' ')
        .slice(0, 500);
      const now = Date.now();
      if (now - (lastWritten.get(line) ?? -Infinity) < 60_000) return;
      lastWritten.set(line, now);
      warn(line);
    };
  return {
    error: write('error'),
    warn: write('warning'),
    info: write('info'),
    debug: write('debug'),
    verbose: write('debug'),
  };
}

export async function startOtel(settings: TracingOn, options: OtelStartOptions): Promise<OtelRunning> {
  diag.setLogger(diagLogger(options.warn), {
    logLevel: DIAG_LEVELS[settings.logLevel],
    suppressOverrideMessage: true,
  });
  const exporter =
    options.exporter ?? (settings.protocol === 'http/json' ? new JsonExporter() : new ProtobufExporter());
  const batch = new BatchSpanProcessor({ exporter, ...settings.batch });
  const provider = new TracerProvider({
    resource: defaultResource()
      .merge(resourceFromAttributes({ 'service.name': settings.defaultServiceName }))
      .merge(detectResources({ detectors: [resourceAttributesEnvDetector, serviceNameEnvDetector] })),
    sampler: sampler(settings),
    spanProcessors: [...(options.before ?? []), new SanitizingSpanProcessor(batch)],
  });
  const contexts = new ScopedContextManager();
  context.setGlobalContextManager(contexts);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());

  // Only requests made inside one of keyroll's spans are traced: a daemon's idle connections and
  // the exporter's own requests (node:http, not undici) never make traces of their own.
  // (Enabled as it is made: it subscribes to undici's diagnostics channels, and registers no
  // module hook, having no module to patch.)
  const undici = new UndiciInstrumentation({ requireParentforSpans: true });
  undici.setTracerProvider(provider);
  let unpatchAws: (() => void) | undefined;
  try {
    unpatchAws = await instrumentAwsSdk(provider);
  } catch (error) {
    // Traces without AWS SDK spans are still traces.
    options.warn(
      sanitizeText(
        `tracing: AWS SDK calls are not traced: ${error instanceof Error ? error.message : String(error)}`,
      ),
    );
  }

  const tracing = new OtelTracing({
    tracer: provider.getTracer('keyroll'),
    contexts,
    ...(settings.traceparent === undefined
      ? {}
      : {
          environment: {
            traceparent: settings.traceparent,
            ...(settings.tracestate === undefined ? {} : { tracestate: settings.tracestate }),
          },
        }),
  });
  if (settings.traceparent !== undefined && !tracing.joinsEnvironment())
    options.warn('tracing: TRACEPARENT is not a valid W3C traceparent; runs start traces of their own');

  // Bounded: an unreachable collector delays the exit by its timeout, never more.
  const bounded = async (work: Promise<void>): Promise<void> => {
    let timer: NodeJS.Timeout | undefined;
    const limit = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, settings.exportTimeoutMs + 1000);
      timer.unref();
    });
    try {
      await Promise.race([
        work.catch((error: unknown) => {
          diag.error('span export failed', error);
        }),
        limit,
      ]);
    } finally {
      clearTimeout(timer);
    }
  };
  return {
    tracing,
    flush: () => bounded(provider.forceFlush({ timeoutMillis: settings.exportTimeoutMs })),
    shutdown: async () => {
      await bounded(provider.shutdown());
      undici.disable();
      unpatchAws?.();
      context.disable();
      propagation.disable();
      diag.disable();
    },
  };
}
