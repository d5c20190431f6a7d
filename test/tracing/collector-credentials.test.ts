// The trace collector's credentials, part by part (issue 27, finding 6; src/tracing/collector-credentials.ts):
// the token after `Bearer`, a Basic credential's user and password, each query value and the
// user and password of the endpoint URL are secrets of their own, blanked from every log line,
// span and error even when they appear without the rest of their header or URL. And one warning
// at start when they would cross the network in clear.
import type { Context } from '@opentelemetry/api';
import { TracerProvider, type ReadableSpan, type Span, type SpanProcessor } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it } from 'vitest';
import { createAuditLog } from '../../src/audit/logger.ts';
import { resetSanitizerForTests, sanitizeText } from '../../src/audit/sanitize.ts';
import { KeyrollError } from '../../src/errors.ts';
import { SanitizingSpanProcessor } from '../../src/tracing/otel/processor.ts';
import { tracingSettings } from '../../src/tracing/settings.ts';
import { startTracing } from '../../src/tracing/start.ts';
import { startOtlpReceiver, startTracingTo } from '../support/otlp-receiver.ts';

const BEARER_TOKEN = 'otlpBearerToken0123456789abcdef';
const HEADER_KEY = 'headerApiKey0123456789';
const BASIC_USER = 'basicUser0123456';
const BASIC_PASSWORD = 'basicPassword0123456';
const URL_USER = 'urlUser01234567';
const URL_PASSWORD = 'urlPassword0123456';
const QUERY_KEY = 'queryApiKey0123456789';
const TRACES_QUERY_KEY = 'tracesQueryKey0123456789';
const PARTS = {
  BEARER_TOKEN,
  HEADER_KEY,
  BASIC_USER,
  BASIC_PASSWORD,
  URL_USER,
  URL_PASSWORD,
  QUERY_KEY,
  TRACES_QUERY_KEY,
};

function credentialEnv(host: string): Record<string, string> {
  return {
    OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer%20${BEARER_TOKEN},x-api-key=${HEADER_KEY}`,
    OTEL_EXPORTER_OTLP_TRACES_HEADERS: `proxy-authorization=Basic ${Buffer.from(`${BASIC_USER}:${BASIC_PASSWORD}`).toString('base64')}`,
    OTEL_EXPORTER_OTLP_ENDPOINT: `http://${URL_USER}:${URL_PASSWORD}@${host}?api-key=${QUERY_KEY}`,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `http://${host}/v1/traces?tenant=acme&token=${TRACES_QUERY_KEY}`,
  };
}

class Recording implements SpanProcessor {
  readonly ended: ReadableSpan[] = [];
  onStart(_span: Span, _parentContext: Context): void {
    // Nothing to record.
  }
  onEnd(span: ReadableSpan): void {
    this.ended.push(span);
  }
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
  }
}

afterEach(() => {
  resetSanitizerForTests();
});

describe("the collector's credentials, each part on its own", () => {
  it('a log line, a span and an error carrying any one part come out blanked', async () => {
    const otlp = await startOtlpReceiver();
    const traced = await startTracingTo(otlp, credentialEnv(new URL(otlp.url).host));
    try {
      expect(traced.tracing).toBeDefined();
      // The collector is on loopback: nothing crosses the network, nothing to warn about.
      expect(traced.warnings).toEqual([]);
      // Each part through each way out; the names of the parts that survived, per way out.
      const leaked: Record<string, string[]> = { error: [], url: [], audit: [], span: [] };
      for (const [name, part] of Object.entries(PARTS)) {
        // An error as the exporter or a proxy would word it, through the CLI's sanitizer.
        const error = new KeyrollError('KR_BACKEND_UNAVAILABLE', `export failed: 401 for ${part}`);
        if (sanitizeText(error.message).includes(part)) leaked.error?.push(name);
        if (
          sanitizeText(`https://collector/v1/traces?key=${encodeURIComponent(part)}`).includes(
            encodeURIComponent(part),
          )
        )
          leaked.url?.push(name);

        const lines: string[] = [];
        const audit = createAuditLog({ destination: { write: (line: string) => lines.push(line) } });
        audit
          .child({ keyId: 'key_a' })
          .emit('key.failed', { step: 'roll', errorCode: 'KR_X', error: `collector said: ${part} refused` });
        if (lines.join('').includes(part) || !lines.join('').includes('[REDACTED]')) leaked.audit?.push(name);

        const next = new Recording();
        const provider = new TracerProvider({ spanProcessors: [new SanitizingSpanProcessor(next)] });
        const span = provider
          .getTracer('test')
          .startSpan('export', { attributes: { 'url.full': `http://collector/?k=${part}`, text: part } });
        span.recordException(new Error(`refused ${part}`));
        span.end();
        await new Promise((resolve) => setImmediate(resolve));
        if (JSON.stringify(next.ended.map((ended) => [ended.attributes, ended.events])).includes(part))
          leaked.span?.push(name);
      }
      expect(leaked).toEqual({ error: [], url: [], audit: [], span: [] });
    } finally {
      await traced.stop();
      await otlp.close();
    }
  });
});

describe('credentials to a plain-HTTP collector', () => {
  it('are warned about once at start, naming the endpoint and what it carries, never a value', async () => {
    const warnings: string[] = [];
    const tracing = await startTracing(credentialEnv('otel-collector.observability:4318'), {
      warn: (line) => warnings.push(line),
    });
    await tracing?.shutdown();
    const plain = warnings.filter((line) => line.includes('plain HTTP'));
    expect(plain).toEqual([
      "tracing: the collector's credentials go over plain HTTP, readable on the network path; use an https:// endpoint (endpoint=http://otel-collector.observability:4318 carrying=headers,url-query)",
    ]);
    for (const part of Object.values(PARTS)) expect(warnings.join('\n')).not.toContain(part);
  });

  it('say nothing for https, a loopback collector, or a collector sent no credential', () => {
    const plainWarnings = (env: Record<string, string>): string[] =>
      tracingSettings(env).warnings.filter((line) => line.includes('plain HTTP'));
    expect(
      plainWarnings({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'https://collector.example:4318',
        OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20x',
      }),
    ).toEqual([]);
    expect(
      plainWarnings({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://localhost:4318',
        OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20x',
      }),
    ).toEqual([]);
    expect(
      plainWarnings({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://[::1]:4318',
        OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20x',
      }),
    ).toEqual([]);
    expect(plainWarnings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector.example:4318' })).toEqual([]);
    expect(plainWarnings({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://u:p@collector.example:4318' })).toHaveLength(
      1,
    );
    // The traces endpoint is the one used: an https one means nothing goes in clear.
    expect(
      plainWarnings({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector.example:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://collector.example/v1/traces',
        OTEL_EXPORTER_OTLP_HEADERS: 'a=b',
      }),
    ).toEqual([]);
  });
});
