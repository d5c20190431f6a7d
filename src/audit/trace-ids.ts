// The trace ids on audit lines (docs/tracing.md): when tracing is on, every line written inside a
// traced span carries that span's `traceId` and `spanId`, so a line leads to its trace and a span
// to its lines. The audit log knows nothing of OpenTelemetry: src/tracing/ (a floor above) tells it
// where the ids of the active span come from, once tracing has started; until then, and whenever
// tracing is off, there is no source and lines carry no ids.

export interface TraceIds {
  /** 32 lower-case hex characters (W3C trace context). */
  traceId: string;
  /** 16 lower-case hex characters. */
  spanId: string;
}

let source: (() => TraceIds | undefined) | undefined;

/** Names where the ids of the active span come from (undefined: nowhere, as when tracing stops). */
export function setTraceIdsSource(next: (() => TraceIds | undefined) | undefined): void {
  source = next;
}

/**
 * The fields pino's `mixin` adds to a line: the active span's ids, or nothing. A new object each
 * time: pino merges the line's own fields into it.
 */
export function traceIdFields(): Partial<TraceIds> {
  const ids = source?.();
  return ids === undefined ? {} : { traceId: ids.traceId, spanId: ids.spanId };
}
