// Invariant 3 canary: drive a rotation down every failure path keyroll has, with the real audit
// logger, the real alerter posting to a loopback webhook receiver, tracing on (OpenTelemetry to a
// loopback OTLP receiver: every span, the HTTP instrumentation's included), and stdout/stderr
// captured, then search everything captured for every secret the emulator ever minted, in every
// form the sanitizer knows (test/support/secret-scan.ts): none may appear.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateIdentity, identityToRecipient } from 'age-encryption';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BackendError } from '../../src/backends/errors.ts';
import type { Backend } from '../../src/backends/types.ts';
import { inSpan } from '../../src/tracing/spans.ts';
import {
  startOtlpReceiver,
  startTracingTo,
  type InProcessTracing,
  type OtlpReceiver,
} from '../support/otlp-receiver.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { useTempDir } from '../support/temp-dir.ts';
import { keyPolicy, startBench, wrapBackend, type Bench } from './harness.ts';

const KEY = 'key_demo_billing';
let bench: Bench;
let receiver: Server;
const escrowDir = useTempDir('keyroll-escrow-', 'file');
const alertBodies: string[] = [];
const captured: string[] = [];
let otlp: OtlpReceiver;
let traced: InProcessTracing;

beforeAll(async () => {
  otlp = await startOtlpReceiver();
  traced = await startTracingTo(otlp);
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      alertBodies.push(body);
      res.writeHead(200).end('{}');
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/alerts`;
  const recipient = await identityToRecipient(await generateIdentity());
  bench = await startBench({
    keys: (org) => [
      keyPolicy(KEY, org(KEY), {
        fallbacks: [
          {
            backend: 'fallback',
            target: { path: `${KEY}.json`, shape: { format: 'json', secretField: 'apiKey', fields: [] } },
          },
        ],
      }),
    ],
    policy: {
      alerts: {
        sinks: { hook: { kind: 'webhook', url, headers: {}, timeoutMs: 2_000, deadlineMs: 10_000 } },
      },
      escrow: { directory: escrowDir.path(), recipients: [recipient] },
    },
  });
});

afterAll(async () => {
  await traced.stop();
  await otlp.close();
  await bench.close();
  await new Promise<void>((resolve) =>
    receiver.close(() => {
      resolve();
    }),
  );
});

const down = (operation: 'write'): BackendError =>
  new BackendError('KR_BACKEND_UNAVAILABLE', 'injected: down', {
    backend: 'x',
    kind: 'file',
    operation,
    path: 'x',
  });
const writesFail =
  (names: string[]) =>
  (name: string, b: Backend): Backend =>
    names.includes(name) ? wrapBackend(b, { writeSecret: () => Promise.reject(down('write')) }) : b;

interface Scenario {
  name: string;
  setup?: () => void;
  wrap?: (name: string, b: Backend) => Backend;
}

const scenarios: Scenario[] = [
  { name: 'success' },
  {
    name: 'roll 400',
    setup: () => {
      bench.emulator.faults.inject('roll', { kind: 'status', status: 400 }, 1);
    },
  },
  {
    name: 'roll 403',
    setup: () => {
      bench.emulator.faults.inject('roll', { kind: 'status', status: 403 }, 1);
    },
  },
  {
    name: 'roll 429',
    setup: () => {
      bench.emulator.faults.inject('roll', { kind: 'status', status: 429, retryAfter: '1' }, 1);
    },
  },
  {
    name: 'roll 500 before applying',
    setup: () => {
      bench.emulator.faults.inject('roll', { kind: 'status', status: 500 }, 1);
    },
  },
  {
    name: 'roll applied then 500',
    setup: () => {
      bench.emulator.faults.inject('roll', { kind: 'failAfterApply', then: 'status500' }, 1);
    },
  },
  {
    name: 'roll applied then dropped',
    setup: () => {
      bench.emulator.faults.inject('roll', { kind: 'failAfterApply', then: 'drop' }, 1);
    },
  },
  {
    name: 'malformed answer with data.key',
    setup: () => {
      bench.emulator.faults.inject(
        'roll',
        { kind: 'malformed', status: 200, body: '{"data":{"key":"{{key}}"}}' },
        1,
      );
    },
  },
  {
    name: 'malformed HTML answer',
    setup: () => {
      bench.emulator.faults.inject(
        'roll',
        { kind: 'malformed', status: 200, body: '<html>{{key}}</html>', contentType: 'text/html' },
        1,
      );
    },
  },
  { name: 'primary down → fallback', wrap: writesFail(['files']) },
  { name: 'everything down → escrow', wrap: writesFail(['files', 'fallback']) },
  { name: 'recovery of the escrowed key' },
  {
    name: 'verify read-back mismatch',
    wrap: (_n, b) => wrapBackend(b, { readSecret: () => Promise.resolve(undefined) }),
  },
  {
    name: 'roll 401 aborts',
    setup: () => {
      bench.emulator.faults.inject('roll', { kind: 'status', status: 401 }, 1);
    },
  },
];

describe('invariant 3: the secret never leaves except to a backend', () => {
  it('invariant 3: no minted secret appears in audit lines, alert bodies, outcomes or stdout/stderr across every failure path', async () => {
    const stdoutWrite = process.stdout.write.bind(process.stdout);
    const stderrWrite = process.stderr.write.bind(process.stderr);
    const capture = (write: typeof stdoutWrite) =>
      ((chunk: string | Uint8Array, ...rest: unknown[]) => {
        captured.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
        return (write as (c: string | Uint8Array, ...r: unknown[]) => boolean)(chunk, ...rest);
      }) as typeof stdoutWrite;
    process.stdout.write = capture(stdoutWrite);
    process.stderr.write = capture(stderrWrite);
    const outcomes: unknown[] = [];
    try {
      for (const scenario of scenarios) {
        scenario.setup?.();
        const summary = await inSpan('canary scenario', { scenario: scenario.name }, () =>
          bench.run({
            trigger: { reason: 'leak', force: true },
            runtime: { alerter: undefined, ...(scenario.wrap ? { wrapBackend: scenario.wrap } : {}) },
          }),
        );
        outcomes.push(summary);
        bench.emulator.faults.clear();
      }
    } finally {
      process.stdout.write = stdoutWrite;
      process.stderr.write = stderrWrite;
    }
    await traced.tracing?.flush();
    const minted = bench.emulator.state.mintedSecrets();
    expect(minted.length).toBeGreaterThan(8);
    expect(alertBodies.length).toBeGreaterThan(5);
    // Every scenario was traced down to its roll request and alert deliveries.
    expect(traced.warnings).toEqual([]);
    expect(otlp.spans.filter((span) => span.name === 'canary scenario')).toHaveLength(scenarios.length);
    expect(otlp.spans.filter((span) => span.name === 'roll').length).toBeGreaterThanOrEqual(
      scenarios.length - 1,
    );
    expect(otlp.spans.some((span) => String(span.attributes['url.full']).endsWith('/alerts'))).toBe(true);
    expectNoSecrets(
      [...bench.lines, ...alertBodies, ...captured, JSON.stringify(outcomes), ...otlp.bodies],
      minted,
      'the audit trail, alert bodies, stdout/stderr, outcomes and exported spans',
    );
    // Fingerprints are allowed and present: the trail still says which secret is which.
    expect(bench.events().some((e) => e.event === 'key.rolled' && typeof e.fingerprint === 'string')).toBe(
      true,
    );
  });
});
