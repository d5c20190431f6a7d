// Traces of a rotation into AWS Secrets Manager (moto): `keyroll rotate` as a child process with the
// OTEL_* variables pointing at a loopback OTLP receiver. The AWS SDK's calls are spans of
// OpenTelemetry's aws-sdk instrumentation beneath the step that made them (the write beneath
// `store`), next to undici's spans of the API calls; no secret, AWS's secret key included, is in any
// span.
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ORG, useCliFixture } from '../cli/harness.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import {
  childrenOf,
  onlySpan,
  otlpEnv,
  startOtlpReceiver,
  subtreeOf,
  type OtlpReceiver,
} from '../support/otlp-receiver.ts';
import { motoEnv } from './aws-fixtures.ts';
import { motoServer } from './servers.ts';

const cli = useCliFixture();
let otlp: OtlpReceiver;

beforeEach(async () => {
  otlp = await startOtlpReceiver();
});

afterEach(async () => {
  await otlp.close();
});

describe('traces of a rotation into AWS Secrets Manager (moto)', () => {
  it('AWS SDK calls are client spans beneath their steps: PutSecretValue beneath store; no secret in any span', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const name = `keyroll-trace/${randomUUID().slice(0, 8)}/billing`;
    await cli.writeFile(
      'policy.yaml',
      `version: 1
api:
  baseUrl: ${cli.emulator.url}
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
backends:
  aws: { kind: aws, endpoint: "${server.endpoint}", region: ${server.region}, createIfMissing: true, timeoutMs: 5000 }
defaults:
  maxAge: 30d
keys:
  - { id: key_demo_billing, organization: ${ORG}, destinations: [{ backend: aws, path: "${name}" }] }
`,
    );
    cli.alsoSecret(server.secretAccessKey);
    const result = await cli.run(
      ['rotate', '-p', 'policy.yaml', '--key', 'key_demo_billing', '--reason', 'leak', '--actor', 'alice'],
      { env: { ...motoEnv(server), ...otlpEnv(otlp) } },
    );
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).not.toContain('tracing');
    const { spans } = otlp;
    expect(new Set(spans.map((span) => span.traceId)).size).toBe(1);

    const key = onlySpan(spans, 'rotate key');
    const aws = spans.filter((span) => span.scope === '@opentelemetry/instrumentation-aws-sdk');
    expect(aws.length).toBeGreaterThan(2);
    for (const span of aws) {
      expect(span.kind).toBe(3);
      expect(span.attributes).toMatchObject({
        'rpc.system': 'aws-api',
        'rpc.service': 'SecretsManager',
        'cloud.region': server.region,
      });
      expect(subtreeOf(spans, key)).toContain(span);
    }
    const store = onlySpan(spans, 'store');
    expect(childrenOf(spans, store).map((span) => span.name)).toContain('SecretsManager.PutSecretValue');
    const put = onlySpan(spans, 'SecretsManager.PutSecretValue');
    expect(put.attributes['http.response.status_code']).toBe(200);
    // Preflight proves the destination before the roll: its calls are beneath it.
    expect(
      childrenOf(spans, onlySpan(spans, 'preflight')).some((span) => span.name.startsWith('SecretsManager.')),
    ).toBe(true);
    // The roll itself went to the API over undici, beneath the roll step.
    expect(childrenOf(spans, onlySpan(spans, 'roll')).map((span) => span.scope)).toEqual([
      '@opentelemetry/instrumentation-undici',
    ]);

    const secrets = [...cli.emulator.state.mintedSecrets(), server.secretAccessKey];
    expectNoSecrets(otlp.bodies, secrets, 'exported spans');
  });
});
