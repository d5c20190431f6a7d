// The span processor in front of the batch processor and the OTLP exporter. It does two things
// when a span ends, and nothing else:
//   1. Invariant 3: every text the span carries (its name, attribute values, event names and
//      attributes, the status message, link attributes) goes through the sanitizer, so a secret that
//      reached an attribute or an exception event (an instrumentation recording an error whose
//      message echoes a request) leaves as [REDACTED], and so do the parts of a URL that was a
//      secret as a whole. This runs at once, while the secret is still known to the sanitizer (a
//      rotation's secrets are forgotten when it ends).
//   2. Invariant 2: the sanitized copy is handed to the batch processor on a later turn of the event
//      loop (setImmediate), never inside span.end(). The batch processor starts an export as soon
//      as a batch is full; handed a span synchronously, an export (a request to the collector)
//      could start inside a call that ends a span, e.g. the HTTP span of the roll request, which
//      undici's instrumentation ends as the roll answer arrives, before the secret is written. Here
//      ending a span is a sanitized copy put on a list; any export happens later, asynchronously.
// forceFlush and shutdown hand over what is waiting first, so a flush at exit loses nothing.
import type { Attributes, Context } from '@opentelemetry/api';
import type { ReadableSpan, Span, SpanProcessor } from '@opentelemetry/sdk-trace';
import { sanitizeText } from '../../audit/public/sanitize.ts';

/** An attribute's value with every string in it sanitized (values may be lists and maps). */
function cleanValue(value: unknown): unknown {
  if (typeof value === 'string') return sanitizeText(value);
  if (Array.isArray(value)) return value.map(cleanValue);
  if (value !== null && typeof value === 'object' && !ArrayBuffer.isView(value)) {
    return Object.fromEntries(
      Object.entries(value).map(([name, inner]) => [sanitizeText(name), cleanValue(inner)]),
    );
  }
  return value;
}

/**
 * Attributes that hold a part of `url.full` (undici's instrumentation sets them). A URL may be a
 * secret as a whole (a Slack webhook URL, whose path is its token; any sink URL given as a
 * reference): the sanitizer blanks the whole URL, but its path alone is not the secret it knows and
 * would go through. So when `url.full` held a secret, its parts are blanked too.
 */
const URL_PARTS = ['url.path', 'url.query', 'url.fragment'];
const REDACTED = '[REDACTED]';

function cleanAttributes(attributes: Attributes | undefined): Attributes {
  const out: Attributes = {};
  for (const [name, value] of Object.entries(attributes ?? {})) out[sanitizeText(name)] = cleanValue(value);
  const url = attributes?.['url.full'];
  if (typeof url === 'string' && out['url.full'] !== url) {
    for (const part of URL_PARTS) if (part in out) out[part] = REDACTED;
  }
  return out;
}

/** A copy of an ended span with every text sanitized. */
export function sanitizedSpan(span: ReadableSpan): ReadableSpan {
  const { status } = span;
  return {
    name: sanitizeText(span.name),
    kind: span.kind,
    spanContext: () => span.spanContext(),
    ...(span.parentSpanContext === undefined ? {} : { parentSpanContext: span.parentSpanContext }),
    startTime: span.startTime,
    endTime: span.endTime,
    status:
      status.message === undefined
        ? { code: status.code }
        : { code: status.code, message: sanitizeText(status.message) },
    attributes: cleanAttributes(span.attributes),
    links: span.links.map((link) => ({
      ...link,
      ...(link.attributes === undefined ? {} : { attributes: cleanAttributes(link.attributes) }),
    })),
    events: span.events.map((event) => ({
      ...event,
      name: sanitizeText(event.name),
      ...(event.attributes === undefined ? {} : { attributes: cleanAttributes(event.attributes) }),
    })),
    duration: span.duration,
    ended: span.ended,
    resource: span.resource,
    instrumentationScope: span.instrumentationScope,
    droppedAttributesCount: span.droppedAttributesCount,
    droppedEventsCount: span.droppedEventsCount,
    droppedLinksCount: span.droppedLinksCount,
  };
}

export class SanitizingSpanProcessor implements SpanProcessor {
  readonly #next: SpanProcessor;
  #waiting: ReadableSpan[] = [];
  #scheduled = false;

  constructor(next: SpanProcessor) {
    this.#next = next;
  }

  onStart(span: Span, parentContext: Context): void {
    // The batch processor does nothing when a span starts; it is told all the same, as the
    // processor contract says.
    this.#next.onStart(span, parentContext);
  }

  onEnd(span: ReadableSpan): void {
    this.#waiting.push(sanitizedSpan(span));
    if (this.#scheduled) return;
    this.#scheduled = true;
    // Unref'd: a waiting span never keeps a finished process alive (shutdown hands it over).
    setImmediate(() => {
      this.#handOver();
    }).unref();
  }

  async forceFlush(): Promise<void> {
    this.#handOver();
    await this.#next.forceFlush();
  }

  async shutdown(): Promise<void> {
    this.#handOver();
    await this.#next.shutdown();
  }

  #handOver(): void {
    this.#scheduled = false;
    const spans = this.#waiting;
    this.#waiting = [];
    for (const span of spans) this.#next.onEnd(span);
  }
}
