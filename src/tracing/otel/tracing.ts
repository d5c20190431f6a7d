// keyroll's tracing API (../spans.ts) on an OpenTelemetry tracer.
import {
  ROOT_CONTEXT,
  SpanStatusCode,
  defaultTextMapGetter,
  trace,
  type Attributes,
  type Context,
  type Span,
  type Tracer,
} from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type { SpanAttributes, SpanParent, TraceSpan, Tracing } from '../spans.ts';
import type { ScopedContextManager } from './context-manager.ts';

/** A keyroll span and the OpenTelemetry span behind it. */
class OtelSpan implements TraceSpan {
  readonly span: Span;
  /** The context that holds this span (what `activateInScope` makes active). */
  readonly context: Context;

  constructor(span: Span, parent: Context) {
    this.span = span;
    this.context = trace.setSpan(parent, span);
  }

  setAttributes(attributes: SpanAttributes): void {
    this.span.setAttributes(defined(attributes));
  }

  fail(code: string): void {
    this.span.setAttribute('error.type', code);
    this.span.setStatus({ code: SpanStatusCode.ERROR, message: code });
  }

  end(atMs?: number): void {
    this.span.end(atMs);
  }
}

function defined(attributes: SpanAttributes): Attributes {
  const out: Attributes = {};
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined) continue;
    out[name] = Array.isArray(value) ? [...(value as readonly string[])] : value;
  }
  return out;
}

export interface OtelTracingOptions {
  tracer: Tracer;
  contexts: ScopedContextManager;
  /** The W3C trace context of the process's environment (TRACEPARENT, TRACESTATE), for `parent: 'environment'`. */
  environment?: { traceparent: string; tracestate?: string };
}

export class OtelTracing implements Tracing {
  readonly #tracer: Tracer;
  readonly #contexts: ScopedContextManager;
  readonly #environment: Context;

  constructor(options: OtelTracingOptions) {
    this.#tracer = options.tracer;
    this.#contexts = options.contexts;
    this.#environment =
      options.environment === undefined
        ? ROOT_CONTEXT
        : new W3CTraceContextPropagator().extract(
            ROOT_CONTEXT,
            {
              traceparent: options.environment.traceparent,
              ...(options.environment.tracestate === undefined
                ? {}
                : { tracestate: options.environment.tracestate }),
            },
            defaultTextMapGetter,
          );
  }

  /** True when TRACEPARENT named a valid span, which `parent: 'environment'` joins. */
  joinsEnvironment(): boolean {
    return trace.getSpanContext(this.#environment) !== undefined;
  }

  startSpan(
    name: string,
    attributes: SpanAttributes,
    options: { parent: SpanParent | 'scope'; startMs?: number },
  ): TraceSpan {
    const parent = this.#parentContext(options.parent);
    const span = this.#tracer.startSpan(
      name,
      {
        attributes: defined(attributes),
        ...(options.startMs === undefined ? {} : { startTime: options.startMs }),
      },
      parent,
    );
    return new OtelSpan(span, parent);
  }

  inScope<T>(span: TraceSpan, work: () => T): T {
    return this.#contexts.with(contextOf(span), work);
  }

  activateInScope(step: TraceSpan): void {
    this.#contexts.activate(contextOf(step));
  }

  deactivateInScope(step: TraceSpan): void {
    if (this.#contexts.active() === contextOf(step)) this.#contexts.activate(this.#contexts.opened());
  }

  // The SDK stamps a span's start with Date.now() and, once a time was given, its end too: the
  // same clock, so an end recorded earlier (the roll's, at its answer) lines up with the others.
  now(): number {
    return Date.now();
  }

  /** The ids of the active span, for audit lines (src/audit/trace-ids.ts). */
  activeIds(): { traceId: string; spanId: string } | undefined {
    const context = trace.getSpanContext(this.#contexts.active());
    return context === undefined ? undefined : { traceId: context.traceId, spanId: context.spanId };
  }

  #parentContext(parent: SpanParent | 'scope'): Context {
    switch (parent) {
      case 'active':
        return this.#contexts.active();
      case 'scope':
        return this.#contexts.opened();
      case 'new-trace':
        return ROOT_CONTEXT;
      case 'environment':
        return this.#environment;
    }
  }
}

function contextOf(span: TraceSpan): Context {
  if (!(span instanceof OtelSpan)) throw new TypeError('a span of another tracing implementation');
  return span.context;
}
