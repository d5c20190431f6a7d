// The Pushgateway push has a total deadline: a gateway (or a proxy in front of it) that answers and
// then drips its body one byte at a time must not hold the run's exit (issue 12, section 2).
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/metrics/metrics.ts';
import { MetricsPushError, pushMetrics } from '../../src/metrics/pushgateway.ts';
import { startReceiver, type Receiver } from '../support/alert-receiver.ts';

let gateway: Receiver;
beforeEach(async () => {
  gateway = await startReceiver();
});
afterEach(async () => {
  await gateway.close();
});

describe('pushMetrics: a gateway that drips its answer', () => {
  it('counts a 2xx as pushed without waiting for its dripping body to end', async () => {
    gateway.answer({ status: 200, dripMs: 100 });

    await expect(
      pushMetrics(gateway.url, 'keyroll', createMetrics({ overdue: false }).registry, { timeoutMs: 500 }),
    ).resolves.toBeUndefined();

    expect(gateway.requests).toHaveLength(1);
  });

  it('reports a 5xx whose body drips as a failed push with its status, by the deadline', async () => {
    gateway.answer({ status: 503, dripMs: 100 });

    const error = await pushMetrics(gateway.url, 'keyroll', createMetrics({ overdue: false }).registry, {
      timeoutMs: 500,
    }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(MetricsPushError);
    expect(error).toMatchObject({ status: 503 });
  });
});
