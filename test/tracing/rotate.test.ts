// Tracing as an operator switches it on: `keyroll rotate` as a child process with the standard
// OTEL_* variables pointing at a loopback OTLP receiver (OTLP/HTTP, JSON), against the emulator and
// a file backend. One trace per run, joined to the TRACEPARENT the CI job gave, with a span per
// key and per step and the HTTP calls beneath them, flushed before the process exits whatever its
// exit code; and no secret in any span (the fixture scans every body the receiver got).
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { eventsNamed, useCliFixture, type CliResult } from '../cli/harness.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import {
  childrenOf,
  onlySpan as one,
  otlpEnv,
  startOtlpReceiver,
  type OtlpReceiver,
  type ReceivedSpan,
} from '../support/otlp-receiver.ts';

const cli = useCliFixture();
let otlp: OtlpReceiver;

beforeEach(async () => {
  otlp = await startOtlpReceiver();
});

afterEach(async () => {
  await otlp.close();
});

/** A CI job's span: the W3C traceparent a scheduler passes in the environment. */
const PARENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_SPAN = '00f067aa0ba902b7';
const TRACEPARENT = `00-${PARENT_TRACE}-${PARENT_SPAN}-01`;

function otelEnv(extra: Record<string, string> = {}): Record<string, string> {
  return otlpEnv(otlp, { OTEL_SERVICE_NAME: 'keyroll-test', ...extra });
}

/** Runs the CLI with tracing on; the received bodies join the fixture's secret scan. */
async function traced(
  args: readonly string[],
  extra: Record<string, string> = {},
  stdin?: string,
): Promise<CliResult> {
  const result = await cli.run(args, { env: otelEnv(extra), ...(stdin === undefined ? {} : { stdin }) });
  scanned.push(...otlp.bodies);
  return result;
}
const scanned: string[] = [];
/** Secrets of the test's own (a sink URL carrying a token). */
const alsoSecret: string[] = [];
afterEach(() => {
  // The fixture's scan covers stdout, stderr and alert bodies; the spans are scanned here.
  const secrets = [...cli.emulator.state.mintedSecrets(), 'demo-owner-token', ...alsoSecret.splice(0)];
  const bodies = scanned.splice(0);
  expectNoSecrets(bodies, secrets, 'exported spans');
});

describe('keyroll rotate with OTEL_EXPORTER_OTLP_ENDPOINT set', () => {
  it('delivers one trace under the TRACEPARENT: the run, the key, each step, and the HTTP calls beneath them', async () => {
    await cli.writePolicy();
    const result = await traced(
      ['rotate', '-p', 'policy.yaml', '--key', 'key_demo_billing', '--reason', 'leak', '--actor', 'alice'],
      { TRACEPARENT },
    );
    expect(result.code).toBe(0);
    const { spans } = otlp;
    expect(new Set(spans.map((span) => span.traceId))).toEqual(new Set([PARENT_TRACE]));
    expect(otlp.paths.every((path) => path === '/v1/traces')).toBe(true);

    const run = one(spans, 'keyroll rotate');
    expect(run.parentSpanId).toBe(PARENT_SPAN);
    expect(run.attributes).toMatchObject({ 'keyroll.command': 'rotate', 'keyroll.exit_code': 0 });
    expect(run.resource['service.name']).toBe('keyroll-test');

    const key = one(spans, 'rotate key');
    expect(key.parentSpanId).toBe(run.spanId);
    expect(key.attributes).toMatchObject({
      'keyroll.key.id': 'key_demo_billing',
      'keyroll.result': 'rotated',
      'keyroll.reason': 'leak',
      'keyroll.rolls': 1,
    });
    expect(key.attributes['keyroll.rotation.id']).toBe(eventsNamed(result, 'key.succeeded')[0]?.rotationId);

    const steps = childrenOf(spans, key).filter((span) => span.scope === 'keyroll');
    expect(steps.map((span) => span.name)).toEqual([
      'preflight',
      'lock',
      'intent',
      'roll',
      'store',
      'verify',
      'finish',
    ]);
    // The steps follow one another: the roll ends at its answer, where the store begins.
    for (const [before, after] of steps
      .slice(0, -1)
      .map((span, i) => [span, steps[i + 1] as ReceivedSpan] as const)) {
      expect(
        before.endNs <= after.startNs + 1_000_000n,
        `${before.name} ends before ${after.name} starts`,
      ).toBe(true);
    }

    // undici's instrumentation: the roll request is a client span of the roll step.
    const roll = one(steps, 'roll');
    const rollCalls = childrenOf(spans, roll);
    expect(rollCalls.map((span) => [span.name, span.kind, span.attributes['http.request.method']])).toEqual([
      ['POST', 3, 'POST'],
    ]);
    expect(String(rollCalls[0]?.attributes['url.full'])).toContain('/key_demo_billing/roll');
    // The verify step's API call with the new key, beneath it.
    expect(childrenOf(spans, one(steps, 'verify')).some((span) => span.kind === 3)).toBe(true);

    // Audit lines carry the ids of the span they were written in.
    const rolled = eventsNamed(result, 'key.rolled')[0];
    expect(rolled?.traceId).toBe(PARENT_TRACE);
    expect(spans.map((span) => span.spanId)).toContain(rolled?.spanId);
  });

  it('a roll the API refuses marks the roll step and the key failed with its error code, never a message; exit 1', async () => {
    await cli.writePolicy();
    cli.emulator.faults.inject('roll', { kind: 'status', status: 400 }, 1);
    const result = await traced([
      'rotate',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_billing',
      '--reason',
      'manual',
      '--actor',
      'bob',
    ]);
    expect(result.code).toBe(1);
    const { spans } = otlp;
    const code = eventsNamed(result, 'key.failed')[0]?.errorCode;
    expect(code).toMatch(/^KR_/);
    const key = one(spans, 'rotate key');
    expect(key.status.code).toBe(2);
    expect(key.attributes).toMatchObject({
      'keyroll.result': 'failed',
      'error.type': code,
      'keyroll.step': 'roll',
    });
    const roll = one(spans, 'roll');
    expect(roll.status).toEqual({ code: 2, message: code });
    expect(roll.attributes['error.type']).toBe(code);
    // The alert's delivery is part of the key's work: a client span in the key's trace.
    expect(
      spans.filter((span) => span.kind === 3 && String(span.attributes['url.full']).includes('/alerts')),
    ).toHaveLength(1);
    expect(one(spans, 'keyroll rotate').attributes).toMatchObject({
      'keyroll.exit_code': 1,
      'error.type': 'KR_EXIT_1',
    });
  });

  it("a Slack webhook URL (a secret: its path is the token) is blanked from the alert's HTTP span, its path too", async () => {
    const slackUrl = `${cli.receiver.url}/services/T0KEYROLL/B0KEYROLL/xoxbSecretWebhookToken0123456789`;
    alsoSecret.push(slackUrl, 'xoxbSecretWebhookToken0123456789');
    cli.alsoSecret(slackUrl);
    cli.alsoSecret('xoxbSecretWebhookToken0123456789');
    await cli.writePolicy({ alertUrl: undefined, extraDefaults: '' });
    const policy = await readFile(join(cli.dir, 'policy.yaml'), 'utf8');
    await cli.writeFile(
      'policy.yaml',
      policy.replace(
        'backends:',
        'alerts:\n  sinks:\n    chat: { kind: slack, webhookUrl: env:SLACK_URL }\nbackends:',
      ),
    );
    cli.emulator.faults.inject('roll', { kind: 'status', status: 403 }, 1);
    const result = await traced(
      ['rotate', '-p', 'policy.yaml', '--key', 'key_demo_billing', '--reason', 'manual', '--actor', 'bob'],
      { SLACK_URL: slackUrl },
    );
    expect(result.code).toBe(1);
    expect(cli.receiver.requests.map((request) => request.path)).toEqual([
      '/services/T0KEYROLL/B0KEYROLL/xoxbSecretWebhookToken0123456789',
    ]);
    const posts = otlp.spans.filter(
      (span) =>
        span.kind === 3 &&
        span.attributes['http.request.method'] === 'POST' &&
        span.parentSpanId !== one(otlp.spans, 'roll').spanId,
    );
    expect(posts).toHaveLength(1);
    expect(posts[0]?.attributes).toMatchObject({
      'url.full': '[REDACTED]',
      'url.path': '[REDACTED]',
      'http.response.status_code': 200,
    });
  });

  it.each<{ code: number; why: string; args: string[]; env: Record<string, string>; stdin?: string }>([
    {
      code: 2,
      why: 'a policy file that is not there',
      args: ['rotate', '-p', 'missing.yaml', '--all'],
      env: {},
    },
    {
      code: 3,
      why: "keyroll's own credential refused",
      args: ['rotate', '-p', 'policy.yaml', '--all'],
      env: { KEYROLL_API_TOKEN: 'not-a-valid-token' },
    },
    {
      code: 4,
      why: 'a leaked value no entry holds',
      args: ['rotate', '-p', 'policy.yaml', '--leaked-secret-stdin'],
      env: {},
      stdin: 'sk_live_not_held_by_any_destination_0123456789',
    },
  ])(
    'exit $code ($why): the run span still leaves before the process exits',
    async ({ code, args, env, stdin }) => {
      await cli.writePolicy();
      const result = await traced(args, env, stdin);
      expect(result.code).toBe(code);
      const run = one(otlp.spans, 'keyroll rotate');
      expect(run.attributes['keyroll.exit_code']).toBe(code);
      expect(run.status.code).toBe(2);
    },
  );

  it('--leaked-secret-stdin: finding the key, its rotation and the proof that the value is dead are one trace, and the leaked value is in no span', async () => {
    await cli.writePolicy();
    expect((await cli.run(['run', '-p', 'policy.yaml'])).code).toBe(0);
    const leaked = JSON.parse(await readFile(join(cli.secretsDir, 'billing.json'), 'utf8')) as {
      apiKey: string;
    };
    const result = await traced(
      ['rotate', '-p', 'policy.yaml', '--leaked-secret-stdin', '--actor', 'alice'],
      {},
      `${leaked.apiKey}\n`,
    );
    expect(result.code, result.stderr).toBe(0);
    const { spans } = otlp;
    expect(new Set(spans.map((span) => span.traceId)).size).toBe(1);
    const run = one(spans, 'keyroll rotate');
    expect(one(spans, 'rotate key').parentSpanId).toBe(run.spanId);
    // The proof: the API asked with the leaked value, after the rotation, inside the run.
    const calls = spans.filter((span) => span.kind === 3);
    expect(calls.length).toBeGreaterThan(3);
    expect(spans.every((span) => span.spanId === run.spanId || span.traceId === run.traceId)).toBe(true);
    expect(otlp.bodies.some((body) => body.includes(leaked.apiKey))).toBe(false);
  });

  it('with OTEL_SDK_DISABLED=true, or no endpoint and no exporter named, nothing is traced and nothing is said about it', async () => {
    await cli.writePolicy();
    const disabled = await traced(
      ['rotate', '-p', 'policy.yaml', '--key', 'key_demo_billing', '--actor', 'bob', '--force'],
      { OTEL_SDK_DISABLED: 'true' },
    );
    expect(disabled.code).toBe(0);
    const off = await cli.run(
      ['rotate', '-p', 'policy.yaml', '--key', 'key_demo_search', '--actor', 'bob', '--force'],
      { env: { OTEL_SERVICE_NAME: 'keyroll-test' } },
    );
    expect(off.code).toBe(0);
    expect(otlp.bodies).toEqual([]);
    for (const result of [disabled, off]) {
      expect(result.stderr).not.toContain('tracing');
      expect(result.events.every((event) => event.traceId === undefined)).toBe(true);
    }
  });

  it('a protocol keyroll cannot send (grpc) is said once on stderr; the rotation goes on untraced', async () => {
    await cli.writePolicy();
    const result = await traced(
      ['rotate', '-p', 'policy.yaml', '--key', 'key_demo_billing', '--actor', 'bob', '--force'],
      { OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
    );
    expect(result.code).toBe(0);
    expect(result.stderr).toMatch(
      /^keyroll: tracing: OTLP protocol "grpc" is not supported.*tracing stays off$/m,
    );
    expect(otlp.bodies).toEqual([]);
  });
});
