// The processor every span passes through as it ends (src/tracing/otel/processor.ts), on the real
// SDK: what a span carries is sanitized at once (invariant 3), and the span reaches the batch
// processor, hence the exporter, only on a later turn of the event loop (invariant 2).
import type { Context } from '@opentelemetry/api';
import { SpanStatusCode } from '@opentelemetry/api';
import { TracerProvider, type ReadableSpan, type Span, type SpanProcessor } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it } from 'vitest';
import { Secret } from '../../../src/audit/secret.ts';
import { resetSanitizerForTests, sanitizeText, withSecretScope } from '../../../src/audit/sanitize.ts';
import { SanitizingSpanProcessor } from '../../../src/tracing/otel/processor.ts';

const SECRET = 'sk_live_processorCanary0123456789abcdef';

class Recording implements SpanProcessor {
  readonly ended: ReadableSpan[] = [];
  flushed = 0;
  onStart(_span: Span, _parentContext: Context): void {
    // Nothing to record.
  }
  onEnd(span: ReadableSpan): void {
    this.ended.push(span);
  }
  forceFlush(): Promise<void> {
    this.flushed++;
    return Promise.resolve();
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

function setUp(): { provider: TracerProvider; next: Recording } {
  const next = new Recording();
  const provider = new TracerProvider({ spanProcessors: [new SanitizingSpanProcessor(next)] });
  return { provider, next };
}

const laterTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

afterEach(() => {
  resetSanitizerForTests();
});

describe('SanitizingSpanProcessor', () => {
  it('invariant 3: a known secret is blanked from the name, every attribute (lists and maps too), events, links and the status', async () => {
    new Secret(SECRET);
    const { provider, next } = setUp();
    const tracer = provider.getTracer('test');
    const linked = tracer.startSpan('other');
    const span = tracer.startSpan(`roll ${SECRET}`, {
      attributes: {
        plain: 'key_demo_billing',
        text: `Bearer ${SECRET}`,
        list: ['a', SECRET],
        map: { inner: { deeper: SECRET } },
        count: 3,
      },
      links: [{ context: linked.spanContext(), attributes: { why: SECRET } }],
    });
    span.recordException(new Error(`the API echoed ${SECRET}`));
    span.addEvent(`event ${SECRET}`, { detail: Buffer.from(SECRET).toString('base64') });
    span.setStatus({ code: SpanStatusCode.ERROR, message: `failed with ${SECRET}` });
    span.end();
    linked.end();
    await laterTurn();
    const out = next.ended.find((s) => s.name.startsWith('roll'));
    expect(out).toBeDefined();
    expect(JSON.stringify(out)).not.toContain(SECRET);
    expect(JSON.stringify(out)).not.toContain(Buffer.from(SECRET).toString('base64'));
    expect(out?.name).toBe('roll [REDACTED]');
    expect(out?.attributes).toMatchObject({
      plain: 'key_demo_billing',
      text: 'Bearer [REDACTED]',
      list: ['a', '[REDACTED]'],
      map: { inner: { deeper: '[REDACTED]' } },
      count: 3,
    });
    expect(out?.links[0]?.attributes).toEqual({ why: '[REDACTED]' });
    expect(out?.events.map((event) => event.name)).toEqual(['exception', 'event [REDACTED]']);
    expect(out?.events[0]?.attributes?.['exception.message']).toBe('the API echoed [REDACTED]');
    expect(out?.status).toEqual({ code: SpanStatusCode.ERROR, message: 'failed with [REDACTED]' });
    // What the exporter needs of a span is still there.
    expect(out?.spanContext().spanId).toBe(span.spanContext().spanId);
    expect(out?.ended).toBe(true);
  });

  it('invariant 3: a URL that is a secret as a whole (a Slack webhook URL) takes its path and query with it; an ordinary URL keeps them', async () => {
    const webhook = 'https://hooks.slack.com/services/T0/B0/webhookTokenCanary0123456789';
    new Secret(webhook);
    const { provider, next } = setUp();
    const tracer = provider.getTracer('test');
    tracer
      .startSpan('POST', {
        attributes: {
          'url.full': webhook,
          'url.path': '/services/T0/B0/webhookTokenCanary0123456789',
          'url.query': '',
          'server.address': 'hooks.slack.com',
        },
      })
      .end();
    tracer
      .startSpan('GET', {
        attributes: {
          'url.full': 'https://api.example.com/v1/projects?limit=1',
          'url.path': '/v1/projects',
          'url.query': '?limit=1',
        },
      })
      .end();
    await laterTurn();
    expect(next.ended.map((span) => span.attributes)).toEqual([
      {
        'url.full': '[REDACTED]',
        'url.path': '[REDACTED]',
        'url.query': '[REDACTED]',
        'server.address': 'hooks.slack.com',
      },
      {
        'url.full': 'https://api.example.com/v1/projects?limit=1',
        'url.path': '/v1/projects',
        'url.query': '?limit=1',
      },
    ]);
  });

  it("invariant 3: the copy is made as the span ends, so a rotation's secret, forgotten when its scope closes, is still blanked", async () => {
    const { provider, next } = setUp();
    const tracer = provider.getTracer('test');
    await withSecretScope(() => {
      new Secret(SECRET);
      tracer.startSpan('store', { attributes: { echoed: SECRET } }).end();
      return Promise.resolve();
    });
    // Forgotten now: a copy made at export time would carry it.
    expect(sanitizeText(SECRET)).toBe(SECRET);
    await laterTurn();
    expect(next.ended[0]?.attributes).toEqual({ echoed: '[REDACTED]' });
  });

  it('invariant 2: ending a span hands nothing to the batch processor (no export can start there); the next turn of the event loop does', async () => {
    const { provider, next } = setUp();
    const span = provider.getTracer('test').startSpan('POST');
    span.end();
    expect(next.ended).toEqual([]);
    await Promise.resolve();
    expect(next.ended).toEqual([]);
    await laterTurn();
    expect(next.ended.map((s) => s.name)).toEqual(['POST']);
  });

  it('forceFlush and shutdown hand over what is waiting at once: a flush at exit loses nothing', async () => {
    const { provider, next } = setUp();
    provider.getTracer('test').startSpan('finish').end();
    await provider.forceFlush();
    expect(next.ended.map((s) => s.name)).toEqual(['finish']);
    expect(next.flushed).toBe(1);
    provider.getTracer('test').startSpan('last').end();
    await provider.shutdown();
    expect(next.ended.map((s) => s.name)).toEqual(['finish', 'last']);
  });
});
