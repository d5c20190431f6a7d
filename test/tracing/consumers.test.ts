// The consumers' refresh in a trace (issue 23 §4): `keyroll rotate` with the OTEL_* variables set
// and a key whose consumer is a webhook (no Kubernetes needed) delivers, under the run's span, a
// `consumer refresh` span with a `webhook notice` child naming the sink, the key, the rotation and
// the outcome; a notice the sink refuses marks both failed with its stable code, never a message.
// Every body the loopback OTLP receiver got is scanned for the secrets the emulator minted.
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
} from '../support/otlp-receiver.ts';

const cli = useCliFixture();
let otlp: OtlpReceiver;
const scanned: string[] = [];

beforeEach(async () => {
  otlp = await startOtlpReceiver();
});

afterEach(async () => {
  await otlp.close();
  expectNoSecrets(
    scanned.splice(0),
    [...cli.emulator.state.mintedSecrets(), 'demo-owner-token'],
    'exported spans',
  );
});

/** The standard policy with billing's consumer: the alert webhook sink `hook`, told of each new value. */
async function writePolicyWithWebhookConsumer(): Promise<void> {
  await cli.writePolicy();
  const policy = await readFile(join(cli.dir, 'policy.yaml'), 'utf8');
  const billing = '    maxAge: 7d\n';
  expect(policy).toContain(billing);
  await cli.writeFile(
    'policy.yaml',
    policy.replace(billing, `${billing}    consumers: [{ kind: webhook, sink: hook }]\n`),
  );
}

async function rotateLeak(): Promise<CliResult> {
  const result = await cli.run(
    ['rotate', '-p', 'policy.yaml', '--key', 'key_demo_billing', '--reason', 'leak', '--actor', 'alice'],
    { env: otlpEnv(otlp, { OTEL_SERVICE_NAME: 'keyroll-test' }) },
  );
  scanned.push(...otlp.bodies);
  return result;
}

describe('keyroll rotate of a key with a webhook consumer, traced', () => {
  it('puts a consumer refresh span under the run, and a webhook notice span beneath it naming the sink, key and rotation', async () => {
    await writePolicyWithWebhookConsumer();
    const result = await rotateLeak();
    expect(result.code, result.stderr).toBe(0);
    const { spans } = otlp;
    const run = one(spans, 'keyroll rotate');
    const refresh = one(spans, 'consumer refresh');
    expect(refresh.parentSpanId).toBe(run.spanId);
    const rotationId = eventsNamed(result, 'key.succeeded')[0]?.rotationId;
    const deliveryId = eventsNamed(result, 'consumers.finished')[0]?.deliveryId;
    expect(refresh.attributes).toMatchObject({
      'keyroll.delivery.id': deliveryId,
      'keyroll.consumers.source': 'run',
      'keyroll.key.ids': ['key_demo_billing'],
      'keyroll.rotation.ids': [rotationId],
      'keyroll.consumers.refreshed': 1,
      'keyroll.consumers.failed': 0,
    });
    expect(refresh.status.code).not.toBe(2);

    const [notice, ...others] = childrenOf(spans, refresh).filter((span) => span.scope === 'keyroll');
    expect(others).toEqual([]);
    expect(notice?.name).toBe('webhook notice');
    expect(notice?.attributes).toEqual({
      'keyroll.consumer.kind': 'webhook',
      'keyroll.consumer.sink': 'hook',
      'keyroll.key.ids': ['key_demo_billing'],
      'keyroll.rotation.ids': [rotationId],
      'keyroll.consumer.result': 'refreshed',
    });
    // The notice went out as the key ended, before the refresh finished: the refresh span covers it.
    expect(refresh.startNs <= (notice?.startNs ?? 0n)).toBe(true);
    expect((notice?.endNs ?? 0n) <= refresh.endNs).toBe(true);
    // A single key's notice goes out right after its store, while the rotation goes on: its POST is
    // an HTTP client span in the key's trace, under the step running when the request started (verify).
    const posts = spans.filter(
      (span) => span.kind === 3 && String(span.attributes['url.full']).startsWith(cli.receiver.url),
    );
    const key = one(spans, 'rotate key');
    const keySpans = [key.spanId, ...childrenOf(spans, key).map((span) => span.spanId)];
    expect(posts).toHaveLength(1);
    expect(keySpans).toContain(posts[0]?.parentSpanId);
    expect(cli.receiver.requests.some((request) => request.raw.includes('"keyId":"key_demo_billing"'))).toBe(
      true,
    );
  });

  it('a sink that refuses the notice marks the notice and the refresh failed with KR_CONSUMER_WEBHOOK_FAILED, and no span carries the message; exit 1', async () => {
    await writePolicyWithWebhookConsumer();
    // The notice is refused (400 is not retried); the consumers alert that follows goes through.
    cli.receiver.answer(400);
    const result = await rotateLeak();
    expect(result.code).toBe(1);
    expect(eventsNamed(result, 'consumer.failed')[0]?.errorCode).toBe('KR_CONSUMER_WEBHOOK_FAILED');
    const { spans } = otlp;
    const refresh = one(spans, 'consumer refresh');
    expect(refresh.status).toEqual({ code: 2, message: 'KR_CONSUMER_WEBHOOK_FAILED' });
    expect(refresh.attributes).toMatchObject({
      'keyroll.consumers.refreshed': 0,
      'keyroll.consumers.failed': 1,
      'error.type': 'KR_CONSUMER_WEBHOOK_FAILED',
    });
    const notice = one(spans, 'webhook notice');
    expect(notice.parentSpanId).toBe(refresh.spanId);
    expect(notice.status).toEqual({ code: 2, message: 'KR_CONSUMER_WEBHOOK_FAILED' });
    expect(notice.attributes).toMatchObject({
      'keyroll.consumer.result': 'failed',
      'error.type': 'KR_CONSUMER_WEBHOOK_FAILED',
    });
    // The audit line says why (the sink's answer); the spans do not.
    expect(otlp.bodies.some((body) => body.includes('not delivered'))).toBe(false);
  });
});
