// Tracing in the daemon (docs/tracing.md): with the OTEL_* variables set, each run the daemon starts
// is a trace of its own (a sweep, a trigger), with the key and step spans beneath it, and the audit
// lines of a rotation carry its trace id. The daemon runs in this process against the emulator and
// a file backend; the spans go to a loopback OTLP receiver, and the canary scan finds no secret in
// them.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Daemon } from '../../src/daemon/daemon.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import {
  keyYaml,
  OWNER_TOKEN,
  postTrigger,
  startDaemonBench,
  TRIGGER_KEYS,
  TRIGGER_SECRET,
  type DaemonBench,
} from '../support/daemon-bench.ts';
import {
  childrenOf,
  onlySpan,
  startOtlpReceiver,
  startTracingTo,
  type InProcessTracing,
  type OtlpReceiver,
} from '../support/otlp-receiver.ts';

const BILLING = 'key_demo_billing';
let bench: DaemonBench;
let otlp: OtlpReceiver;
let traced: InProcessTracing;
let daemon: Daemon;

beforeEach(async () => {
  otlp = await startOtlpReceiver();
  traced = await startTracingTo(otlp, { OTEL_SERVICE_NAME: 'keyroll-daemon-test' });
  bench = await startDaemonBench();
  await bench.writePolicy(keyYaml(BILLING, 'schedule: "0 3 * * 1"'));
  daemon = await bench.start({ triggerKeys: TRIGGER_KEYS });
});

afterEach(async () => {
  await bench.close();
  await traced.stop();
  await otlp.close();
});

describe('keyroll daemon with OTEL_EXPORTER_OTLP_ENDPOINT set', () => {
  it('makes the first sweep and a trigger two traces, each with its key, steps and API calls, and puts their ids on the audit lines', async () => {
    expect(traced.tracing).toBeDefined();
    // The first sweep rotates the key (never rotated by keyroll); then a trigger rotates it again.
    await daemon.idle();
    const answer = await postTrigger(daemon, {
      body: JSON.stringify({ keys: [BILLING], reason: 'leak', actor: 'alice' }),
    });
    expect(answer.status).toBe(202);
    await daemon.idle();
    await traced.tracing?.flush();
    expect(traced.warnings).toEqual([]);

    const { spans } = otlp;
    const sweep = onlySpan(spans, 'keyroll daemon sweep');
    const trigger = onlySpan(spans, 'keyroll daemon trigger');
    // Roots of their own: a daemon's runs are not children of one another.
    expect(sweep.parentSpanId).toBe('');
    expect(trigger.parentSpanId).toBe('');
    expect(sweep.traceId).not.toBe(trigger.traceId);
    expect(sweep.attributes).toMatchObject({
      'keyroll.command': 'daemon',
      'keyroll.run.source': 'sweep',
      'keyroll.reason': 'scheduled',
      'keyroll.keys': 1,
    });
    expect(trigger.attributes).toMatchObject({ 'keyroll.run.source': 'trigger', 'keyroll.reason': 'leak' });
    expect(sweep.resource['service.name']).toBe('keyroll-daemon-test');

    for (const run of [sweep, trigger]) {
      // The run's check of keyroll's own credential, then the key.
      const [check, key, ...others] = childrenOf(spans, run);
      expect(others).toEqual([]);
      expect(check?.attributes['url.full']).toMatch(/\/v1\/projects\?limit=1$/);
      expect(key?.name).toBe('rotate key');
      expect(key?.attributes).toMatchObject({ 'keyroll.key.id': BILLING, 'keyroll.result': 'rotated' });
      const steps = childrenOf(spans, key ?? run).filter((span) => span.scope === 'keyroll');
      expect(steps.map((span) => span.name)).toEqual([
        'preflight',
        'lock',
        'intent',
        'roll',
        'store',
        'verify',
        'finish',
      ]);
      // undici's instrumentation: the roll request beneath the roll step.
      expect(
        childrenOf(spans, steps[3] ?? run).map((span) => span.attributes['http.request.method']),
      ).toEqual(['POST']);
    }

    // Each rotation's audit lines lead to its trace.
    const succeeded = bench.events('key.succeeded');
    expect(succeeded.map((event) => event.traceId)).toEqual([sweep.traceId, trigger.traceId]);
    expectNoSecrets(otlp.bodies, [...bench.emulator.state.mintedSecrets(), OWNER_TOKEN, TRIGGER_SECRET]);
  });
});
