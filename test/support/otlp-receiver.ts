// A real loopback OTLP/HTTP receiver for the tracing tests: it accepts `POST /v1/traces` in OTLP's
// JSON encoding (the exporter sends it with OTEL_EXPORTER_OTLP_PROTOCOL=http/json), answers as a
// collector does, keeps every raw body (for the secret scan) and decodes the spans.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { vi } from 'vitest';
import { startTracing, type RunningTracing } from '../../src/tracing/start.ts';

export type AttributeValue = string | number | boolean | AttributeValue[] | undefined;

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** Empty for a root span. */
  parentSpanId: string;
  name: string;
  /** 1 internal, 2 server, 3 client (OTLP's SpanKind). */
  kind: number;
  scope: string;
  startNs: bigint;
  endNs: bigint;
  attributes: Record<string, AttributeValue>;
  status: { code: number; message?: string };
  events: { name: string; attributes: Record<string, AttributeValue> }[];
  resource: Record<string, AttributeValue>;
}

export interface OtlpReceiver {
  /** Base URL for OTEL_EXPORTER_OTLP_ENDPOINT, e.g. http://127.0.0.1:43121 */
  readonly url: string;
  /** Every request body as it arrived. */
  readonly bodies: string[];
  readonly spans: ReceivedSpan[];
  /** Paths requested (the exporter appends /v1/traces to the endpoint). */
  readonly paths: string[];
  close(): Promise<void>;
}

interface OtlpAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: number | string;
  doubleValue?: number;
  arrayValue?: { values?: OtlpAnyValue[] };
}
interface OtlpKeyValue {
  key: string;
  value?: OtlpAnyValue;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  startTimeUnixNano: string | number;
  endTimeUnixNano: string | number;
  attributes?: OtlpKeyValue[];
  status?: { code?: number; message?: string };
  events?: { name: string; attributes?: OtlpKeyValue[] }[];
}
interface OtlpRequest {
  resourceSpans?: {
    resource?: { attributes?: OtlpKeyValue[] };
    scopeSpans?: { scope?: { name?: string }; spans?: OtlpSpan[] }[];
  }[];
}

function decodeValue(value: OtlpAnyValue | undefined): AttributeValue {
  if (value === undefined) return undefined;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.arrayValue !== undefined) return (value.arrayValue.values ?? []).map(decodeValue);
  return undefined;
}

function decodeAttributes(attributes: OtlpKeyValue[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries(
    (attributes ?? []).map((attribute) => [attribute.key, decodeValue(attribute.value)]),
  );
}

export function decodeSpans(body: OtlpRequest): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const resourceSpans of body.resourceSpans ?? []) {
    const resource = decodeAttributes(resourceSpans.resource?.attributes);
    for (const scopeSpans of resourceSpans.scopeSpans ?? []) {
      for (const span of scopeSpans.spans ?? []) {
        spans.push({
          traceId: span.traceId,
          spanId: span.spanId,
          parentSpanId: span.parentSpanId ?? '',
          name: span.name,
          kind: span.kind,
          scope: scopeSpans.scope?.name ?? '',
          startNs: BigInt(span.startTimeUnixNano),
          endNs: BigInt(span.endTimeUnixNano),
          attributes: decodeAttributes(span.attributes),
          status: {
            code: span.status?.code ?? 0,
            ...(span.status?.message ? { message: span.status.message } : {}),
          },
          events: (span.events ?? []).map((event) => ({
            name: event.name,
            attributes: decodeAttributes(event.attributes),
          })),
          resource,
        });
      }
    }
  }
  return spans;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const bodies: string[] = [];
  const spans: ReceivedSpan[] = [];
  const paths: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      paths.push(req.url ?? '');
      bodies.push(raw);
      if (req.method !== 'POST' || !String(req.headers['content-type']).startsWith('application/json')) {
        res.writeHead(415, { 'content-type': 'application/json' }).end('{}');
        return;
      }
      spans.push(...decodeSpans(JSON.parse(raw) as OtlpRequest));
      // An empty ExportTraceServiceResponse: everything accepted.
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${String(port)}`,
    bodies,
    spans,
    paths,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => {
          resolve();
        });
      }),
  };
}

/** The variables that point keyroll's traces at `receiver` (OTLP/HTTP, JSON). */
export function otlpEnv(receiver: OtlpReceiver, extra: Record<string, string> = {}): Record<string, string> {
  return { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', ...extra };
}

export function spansNamed(spans: readonly ReceivedSpan[], name: string): ReceivedSpan[] {
  return spans.filter((span) => span.name === name);
}

/** The one span named `name`; throws when there is none or more than one. */
export function onlySpan(spans: readonly ReceivedSpan[], name: string): ReceivedSpan {
  const found = spansNamed(spans, name);
  if (found.length !== 1)
    throw new Error(
      `expected one span named ${JSON.stringify(name)}, found ${String(found.length)} among ${JSON.stringify(spans.map((span) => span.name))}`,
    );
  return found[0] as ReceivedSpan;
}

export function childrenOf(spans: readonly ReceivedSpan[], parent: ReceivedSpan): ReceivedSpan[] {
  return spans.filter((span) => span.parentSpanId === parent.spanId);
}

/** The span and everything beneath it. */
export function subtreeOf(spans: readonly ReceivedSpan[], root: ReceivedSpan): ReceivedSpan[] {
  const out = [root];
  for (let i = 0; i < out.length; i++) out.push(...childrenOf(spans, out[i] as ReceivedSpan));
  return out;
}

/** Tracing started in this process (the daemon's and the engine's tests), sending to a receiver. */
export interface InProcessTracing {
  readonly tracing: RunningTracing | undefined;
  /** What tracing said (it says nothing when all is well). */
  readonly warnings: string[];
  /** Shuts tracing down (its spans flushed) and gives the environment back. */
  stop(): Promise<void>;
}

/**
 * Starts tracing in this process with the OTEL_* variables pointing at `receiver`. They are set in
 * process.env (stubbed until stop): the OTLP exporter reads its endpoint there, as in the CLI.
 */
export async function startTracingTo(
  receiver: OtlpReceiver,
  extra: Record<string, string> = {},
): Promise<InProcessTracing> {
  for (const [name, value] of Object.entries(otlpEnv(receiver, extra))) vi.stubEnv(name, value);
  const warnings: string[] = [];
  const tracing = await startTracing(process.env, {
    warn: (line) => {
      warnings.push(line);
    },
  });
  return {
    tracing,
    warnings,
    stop: async () => {
      await tracing?.shutdown();
      vi.unstubAllEnvs();
    },
  };
}
