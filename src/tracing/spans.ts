// The tracing API the rest of keyroll calls (docs/tracing.md): a span around some work, and the
// steps of a rotation as spans one after the other inside the key's span. It imports nothing of
// OpenTelemetry: when tracing is off (the default) there is no implementation and every call is a
// plain function call with nothing behind it, so a cold start never loads the SDK. `startTracing`
// (start.ts) installs the OpenTelemetry implementation (otel/) when the OTEL_* variables ask for it.
//
// What a span may carry: ids, counts, step names, results and stable error codes, never a message
// or a value (invariant 3). Every attribute and event, keyroll's and the instrumentations', still
// goes through the sanitizer when its span ends (otel/processor.ts), as a last line of defence.
import { errorCode } from '../errors.ts';

export type SpanAttributeValue = string | number | boolean | readonly string[];
/** Attribute names follow OpenTelemetry's dotted style (`keyroll.key.id`); undefined values are left out. */
export type SpanAttributes = Readonly<Record<string, SpanAttributeValue | undefined>>;

/** A span keyroll opened. */
export interface TraceSpan {
  setAttributes(attributes: SpanAttributes): void;
  /** Marks the span failed, with a stable error code (`error.type`); never a message. */
  fail(code: string): void;
  /** Ends the span, now or at `atMs` (an instant from `spanClock()` taken earlier). Once only. */
  end(atMs?: number): void;
}

/**
 * Where a new span's parent comes from: the active span (`active`), none (`new-trace`: a trace of
 * its own, the daemon's sweeps, triggers and leak reports), or the `TRACEPARENT` of the process's
 * environment when there is one (`environment`: a one-shot run joins the CI job or scheduler that
 * started it).
 */
export type SpanParent = 'active' | 'new-trace' | 'environment';

/** What an implementation provides (otel/tracing.ts; tests install their own). */
export interface Tracing {
  /** A new span; `parent: 'scope'` makes it a child of the current scope's own span (a step). */
  startSpan(
    name: string,
    attributes: SpanAttributes,
    options: { parent: SpanParent | 'scope'; startMs?: number },
  ): TraceSpan;
  /** Runs `work` with `span` active, in a scope of its own: the steps started inside it are its children. */
  inScope<T>(span: TraceSpan, work: () => T): T;
  /** Makes `step` (from startSpan with parent 'scope') the active span of the current scope. */
  activateInScope(step: TraceSpan): void;
  /** The scope's own span is active again, if `step` still is (a later step may have replaced it). */
  deactivateInScope(step: TraceSpan): void;
  /** Now, in epoch milliseconds, on the clock spans are stamped with. */
  now(): number;
}

let tracing: Tracing | undefined;

/** Installs (or, with undefined, removes) the implementation: start.ts when tracing starts and stops; tests. */
export function installTracing(next: Tracing | undefined): void {
  tracing = next;
}

export function tracingOn(): boolean {
  return tracing !== undefined;
}

const NOOP_SPAN: TraceSpan = {
  setAttributes: () => undefined,
  fail: () => undefined,
  end: () => undefined,
};

/**
 * Runs `work` inside a new span, which ends when the work settles (failed with the error's code
 * when it throws). The span is active for the work: HTTP and AWS SDK calls made inside are its
 * children, and so are the steps started inside it (`startStep`). `startMs` (from `spanClock()`)
 * starts the span earlier, at work that already began (the consumers' refresh: the first webhook
 * notice went out as its key ended).
 */
export async function inSpan<T>(
  name: string,
  attributes: SpanAttributes,
  work: (span: TraceSpan) => Promise<T>,
  parent: SpanParent = 'active',
  startMs?: number,
): Promise<T> {
  const current = tracing;
  if (current === undefined) return work(NOOP_SPAN);
  const span = current.startSpan(name, attributes, { parent, ...(startMs === undefined ? {} : { startMs }) });
  try {
    return await current.inScope(span, () => work(span));
  } catch (error) {
    span.fail(errorCode(error));
    throw error;
  } finally {
    span.end();
  }
}

/**
 * Starts a step of the current scope (the span of the nearest `inSpan`): a child of that span,
 * active in the scope until it ends, so the calls the step makes are its children. Steps follow one
 * another; ending one makes the scope's own span active again. Starting and ending a step is
 * memory only, no I/O: span export is batched and leaves on a later turn of the event loop
 * (otel/processor.ts), which is what lets a rotation mark the store step between the roll answer
 * and the write (invariant 2).
 */
export function startStep(name: string, attributes: SpanAttributes = {}, startMs?: number): TraceSpan {
  const current = tracing;
  if (current === undefined) return NOOP_SPAN;
  const span = current.startSpan(name, attributes, {
    parent: 'scope',
    ...(startMs === undefined ? {} : { startMs }),
  });
  current.activateInScope(span);
  let ended = false;
  return {
    setAttributes: (more) => {
      span.setAttributes(more);
    },
    fail: (code) => {
      span.fail(code);
    },
    end: (atMs) => {
      if (ended) return;
      ended = true;
      current.deactivateInScope(span);
      span.end(atMs);
    },
  };
}

/** Now on the spans' clock (0 when tracing is off): for a span that ends at an instant recorded earlier. */
export function spanClock(): number {
  return tracing?.now() ?? 0;
}
