// Tracing of the daemon's leak intake (docs/tracing.md): a GitHub secret-scanning alert is one
// trace, `keyroll leak report`, holding the search for the key, the rotation's run (which joins it
// instead of starting a trace of its own) and the proof that the leaked value is dead; neither the
// leaked value nor the new one is in any span.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { secretScanningWebhook } from '../support/fake-github.ts';
import {
  BILLING,
  deliver,
  GITHUB_WEBHOOK_SECRET,
  intakePolicy,
  startWithIntake,
  storeFirstSecret,
  useGithubBench,
} from '../leaks/github/support.ts';
import {
  childrenOf,
  onlySpan,
  startOtlpReceiver,
  startTracingTo,
  subtreeOf,
  type InProcessTracing,
  type OtlpReceiver,
} from '../support/otlp-receiver.ts';

let otlp: OtlpReceiver;
let traced: InProcessTracing;

beforeEach(async () => {
  otlp = await startOtlpReceiver();
  traced = await startTracingTo(otlp);
});

afterEach(async () => {
  await traced.stop();
  await otlp.close();
});

const benches = useGithubBench();

describe('a GitHub leak report with tracing on', () => {
  it('is one trace: the report, the rotation run beneath it with its key and steps, and the proof', async () => {
    const bench = benches.bench();
    const github = benches.github();
    await bench.writePolicyText(intakePolicy(bench, github));
    const daemon = await startWithIntake(bench, github);
    const leaked = await storeFirstSecret(bench, daemon, BILLING);
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 42, state: 'open', secret: leaked });

    const answer = await deliver(
      daemon,
      secretScanningWebhook('created', { owner: 'octo-org', repo: 'billing-app', number: 42 }),
    );
    expect(answer.status).toBe(202);
    await github.patched('octo-org', 'billing-app', 42);
    await daemon.idle();
    await traced.tracing?.flush();
    expect(traced.warnings).toEqual([]);

    const { spans } = otlp;
    const report = onlySpan(spans, 'keyroll leak report');
    expect(report.parentSpanId).toBe('');
    expect(report.attributes).toMatchObject({
      'keyroll.leak.source': 'github',
      'keyroll.reason': 'leak',
      'keyroll.leak.verdict': 'closed',
      'keyroll.keys': 1,
    });
    // The rotation's run joined the report's trace (the first trigger, storeFirstSecret's, did not).
    const runs = spans.filter((span) => span.name === 'keyroll daemon trigger');
    expect(runs.map((span) => span.parentSpanId)).toEqual(['', report.spanId]);
    const run = runs[1];
    const key = childrenOf(spans, run ?? report).find((span) => span.name === 'rotate key');
    expect(key?.attributes).toMatchObject({
      'keyroll.key.id': BILLING,
      'keyroll.reason': 'leak',
      'keyroll.result': 'rotated',
    });
    expect(
      childrenOf(spans, key ?? report)
        .filter((span) => span.scope === 'keyroll')
        .map((span) => span.name),
    ).toEqual(['preflight', 'lock', 'intent', 'roll', 'store', 'verify', 'finish']);
    // The proof: the API asked with the leaked value, answered 401, in the report's trace.
    const calls = subtreeOf(spans, report).filter((span) => span.kind === 3);
    expect(calls.some((span) => span.attributes['http.response.status_code'] === 401)).toBe(true);

    expectNoSecrets(otlp.bodies, [
      leaked,
      await bench.storedSecret(BILLING),
      GITHUB_WEBHOOK_SECRET,
      github.token,
    ]);
  });
});
