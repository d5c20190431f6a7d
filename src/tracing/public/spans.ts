// src/tracing/spans.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { inSpan, spanClock, startStep } from '../spans.ts';
export type { SpanAttributes, TraceSpan } from '../spans.ts';
