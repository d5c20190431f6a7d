// Invariant 12 for consumers outside Kubernetes: a single key's roll kills the value its consumers
// hold, so its `webhook` consumers hear of the new value as soon as it is stored, before verify
// and finish (which under load end tens of milliseconds later). The notice says so (`stage:
// stored`), never carries the secret, goes to each sink once, and the run waits for it. A
// two-slot entry's previous value still works (invariant 10): its notice waits for the end.
// Real loopback servers: the emulator, the file backend and a webhook receiver.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { AlertSinkConfig } from '../../src/alerts/config.ts';
import { createRefresher } from '../../src/consumers/create.ts';
import type { DeliveryReport } from '../../src/consumers/types.ts';
import type { KeyPolicy } from '../../src/policy/schema.ts';
import { runRotations, type RunSummary } from '../../src/rotation/run.ts';
import { startReceiver, type Receiver } from '../support/alert-receiver.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { keyPolicy, startBench, type Bench } from './harness.ts';

const SINGLE = 'key_demo_billing';
const ENTRY = 'billing-api';
const SLOTS = ['key_demo_billing_a', 'key_demo_billing_b'] as const;
const HOUR = 3600_000;

let receiver: Receiver;
let bench: Bench;

beforeEach(async () => {
  receiver = await startReceiver();
  const sink = (path: string): AlertSinkConfig => ({
    kind: 'webhook',
    url: `${receiver.url}/${path}`,
    headers: {},
    timeoutMs: 2_000,
    deadlineMs: 10_000,
  });
  bench = await startBench({
    keys: (org) => [
      keyPolicy(SINGLE, org(SINGLE), {
        consumers: [{ kind: 'webhook', sink: 'cache-drop' }],
        notify: { onFailure: [], onSuccess: ['cache-drop', 'automation'] },
      }),
      // refreshConsumers: always, so a slot rotation that leaves the previous value alive still tells its webhook.
      keyPolicy(ENTRY, org(SLOTS[0]), {
        slots: SLOTS,
        consumerRefreshMs: HOUR,
        minIntervalMs: HOUR,
        maxAgeMs: 2 * HOUR,
        consumers: [{ kind: 'webhook', sink: 'cache-drop' }],
        refreshConsumers: 'always',
      }),
    ],
    policy: { alerts: { sinks: { 'cache-drop': sink('cache-drop'), automation: sink('automation') } } },
  });
});
afterEach(async () => {
  await bench.close();
  await receiver.close();
});

interface Notice {
  keyId: string;
  stage: string;
  event: string;
}

/** One forced run through the CLI's wiring: rotations, the early notices, then the delivery. */
async function run(
  keys: readonly KeyPolicy[],
  atVerify: (keyId: string) => Promise<void>,
): Promise<{ summary: RunSummary; report: DeliveryReport | undefined }> {
  let current = '';
  const runtime = await bench.runtime({
    checkpoint: async (step) => {
      if (step === 'verify') await atVerify(current);
    },
  });
  try {
    const refresher = createRefresher(bench.policy, {
      alerter: runtime.alerter,
      notifier: runtime.notifier,
      kubeClient: () => {
        throw new Error('no Kubernetes here');
      },
    });
    const delivery = refresher.begin(bench.audit, bench.policy.keys);
    const summary = await runRotations(runtime, {
      keys,
      trigger: { reason: 'scheduled', force: true },
      concurrency: 1,
      onKeyStored: (outcome) => {
        current = outcome.keyId;
        delivery.storedBeforeVerify(bench.key(outcome.keyId), outcome);
      },
      onKeyDone: (outcome) => {
        delivery.stored(bench.key(outcome.keyId), outcome);
      },
    });
    return { summary, report: await delivery.finish() };
  } finally {
    await runtime.close();
  }
}

const notices = (path: string): Notice[] =>
  receiver.requests.filter((request) => request.path === `/${path}`).map((request) => request.body as Notice);

describe('the webhook notice of a stored value (invariant 12)', () => {
  it("tells a single key's webhook consumer at the store, before verify; the other success sinks at the end; each once, never the secret", async () => {
    const heardBeforeVerify: number[] = [];
    const { summary, report } = await run([bench.key(SINGLE)], async () => {
      // The notice is fired, not awaited: give it the time to arrive, verify waits meanwhile.
      await vi
        .waitFor(
          () => {
            expect(notices('cache-drop')).toHaveLength(1);
          },
          { timeout: 5_000 },
        )
        .catch(() => undefined);
      heardBeforeVerify.push(notices('cache-drop').length, notices('automation').length);
    });

    expect(summary.outcomes.map((outcome) => outcome.result)).toEqual(['rotated']);
    // At verify, the consumer's sink had been told and the notify.onSuccess-only sink not yet.
    expect(heardBeforeVerify).toEqual([1, 0]);
    expect(notices('cache-drop')).toEqual([
      expect.objectContaining({ keyId: SINGLE, stage: 'stored', event: 'rotation.succeeded' }),
    ]);
    expect(notices('automation')).toEqual([
      expect.objectContaining({ keyId: SINGLE, stage: 'finished', event: 'rotation.succeeded' }),
    ]);
    expect(report).toMatchObject({ refreshed: 2, failed: 0 });
    expect(bench.events().filter((event) => event.event === 'consumer.notified')).toHaveLength(2);
    expectNoSecrets(
      receiver.requests.map((request) => request.raw),
      [bench.emulator.state.currentSecret(SINGLE)],
      'the notices',
    );
  });

  it("tells a two-slot entry's webhook consumer at the end, after verify: the value it holds still works", async () => {
    const heardBeforeVerify: number[] = [];
    const { summary, report } = await run([bench.key(ENTRY)], () => {
      heardBeforeVerify.push(receiver.requests.length);
      return Promise.resolve();
    });

    expect(summary.outcomes.map((outcome) => outcome.result)).toEqual(['rotated']);
    expect(heardBeforeVerify).toEqual([0]);
    expect(notices('cache-drop')).toEqual([expect.objectContaining({ keyId: ENTRY, stage: 'finished' })]);
    expect(report).toMatchObject({ refreshed: 1, failed: 0 });
  });
});
