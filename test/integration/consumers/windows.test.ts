// The restart window and the order of restarts (invariant 12): a slot rotation whose previous value
// still works restarts nothing outside the window (the restart is recorded as owed on the
// workload), the first run inside the window restarts it once — two runners racing for it
// included — and a leak ignores the window; restarts keep the policy's order and the cap.
import { describe, expect, it } from 'vitest';
import { owedRestarts, RESTARTED_FOR } from '../../../src/consumers/markers.ts';
import { consumerStatuses } from '../../../src/consumers/status.ts';
import type { RestartWindow } from '../../../src/policy/consumers.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { kubeApiServer } from '../servers.ts';
import { consumerNamespace, type ConsumerNamespace } from '../../support/consumer-cluster.ts';
import { LEAK, useConsumerBench, type ConsumerBench } from '../../support/consumer-bench.ts';

const server = await kubeApiServer();
const ENTRY = 'entry_checkout';
const SLOTS = ['key_slot_a', 'key_slot_b'] as const;
const MANUAL = { reason: 'manual', force: true, actor: 'test' } as const;

/** A one-minute window twelve hours away: closed now, whatever the time of day. */
function closedWindow(): RestartWindow {
  const at = new Date(Date.now() + 12 * 3600_000);
  const minute = at.getUTCHours() * 60 + at.getUTCMinutes();
  const from = Math.min(minute, 1438);
  return { days: [0, 1, 2, 3, 4, 5, 6], fromMinute: from, toMinute: from + 1, timezone: 'UTC' };
}
const OPEN: RestartWindow = { days: [0, 1, 2, 3, 4, 5, 6], fromMinute: 0, toMinute: 1440, timezone: 'UTC' };

if (server === undefined) {
  describe.skip('restart windows on a real Kubernetes API server (not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;
  const temp = useTempDir('keyroll-consumer-windows-');
  const fixture = useConsumerBench();

  /** A slot entry with refreshConsumers: always, its ExternalSecret and Deployment, rotated once already. */
  async function slotEntry(): Promise<{ cluster: ConsumerNamespace; bench: ConsumerBench }> {
    const cluster = await consumerNamespace(kube, temp.path(), (namespace) => [
      { namespace, externalSecrets: ['checkout-api-key'], deployments: ['checkout'] },
    ]);
    await cluster.createExternalSecret('checkout-api-key');
    await cluster.createDeployment('checkout');
    const controllers = fixture.standIns(cluster, { syncDelayMs: 50, rolloutMs: 50 });
    const bench = await fixture.start(cluster.client, [
      {
        id: ENTRY,
        consumers: [
          { kind: 'externalSecret', namespace: cluster.namespace, name: 'checkout-api-key' },
          { kind: 'deployment', namespace: cluster.namespace, name: 'checkout' },
        ],
        overrides: { slots: SLOTS, consumerRefreshMs: 1, refreshConsumers: 'always' },
      },
    ]);
    // The entry's first value: nothing held one before, so it is delivered at once.
    const first = await bench.run([ENTRY], MANUAL, bench.refresher({ restartWindow: closedWindow() }));
    expect(first.report).toMatchObject({ refreshed: 2, deferred: 0 });
    expect(controllers.restartsOf('checkout')).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 5));
    return { cluster, bench };
  }

  describe('a slot rotation whose previous value still works (refreshConsumers: always)', () => {
    it('outside the window: synced, the restart deferred and recorded on the workload', async () => {
      const { cluster, bench: b } = await slotEntry();

      const { summary, report } = await b.run(
        [ENTRY],
        MANUAL,
        b.refresher({ restartWindow: closedWindow() }),
      );

      expect(summary.outcomes[0]).toMatchObject({ result: 'rotated', previousActiveWorks: true });
      expect(report).toMatchObject({ refreshed: 1, deferred: 1, failed: 0 });
      expect(fixture.controllers.restartsOf('checkout')).toHaveLength(1);
      const owed = owedRestarts(await cluster.readWorkload('deployments', 'checkout'));
      expect(owed).toEqual([
        expect.objectContaining({
          rotationId: summary.outcomes[0]?.rotationId,
          keyId: ENTRY,
          urgent: false,
          deferred: true,
        }),
      ]);
      const [deferred] = b.events('consumer.deferred');
      expect(deferred).toMatchObject({ consumerKind: 'deployment', name: 'checkout' });
      expect(String(deferred?.nextAction)).toMatch(/restart window \(it opens at \d{4}-/);
      expect(b.bench.alerter.alerts).toEqual([]);
      // keyroll status: the ExternalSecret holds the new value, the workload waits for the window.
      const key = b.bench.policy.keys.find((candidate) => candidate.id === ENTRY);
      if (key === undefined) throw new Error('no entry');
      const statuses = await consumerStatuses(
        key,
        { lastRotatedAt: summary.outcomes[0]?.rotatedAt, lastRotationId: summary.outcomes[0]?.rotationId },
        cluster.client,
      );
      expect(statuses.map((status) => [status.consumer.split(' ')[0], status.state])).toEqual([
        ['externalSecret', 'current'],
        ['deployment', 'deferred'],
      ]);
      expect(statuses[1]?.detail).toContain(
        `waiting for the restart window for ${ENTRY} (${String(summary.outcomes[0]?.rotationId)})`,
      );
    });

    it('inside the window, two runners pick the owed restart up at once: the workload restarts once', async () => {
      const { cluster, bench: b } = await slotEntry();
      const { summary } = await b.run([ENTRY], MANUAL, b.refresher({ restartWindow: closedWindow() }));
      const rotationId = summary.outcomes[0]?.rotationId ?? '';

      const [first, second] = await Promise.all([
        b.refresher({ restartWindow: OPEN }).pickUpOwed(b.bench.policy.keys, b.bench.audit, b.records),
        b.refresher({ restartWindow: OPEN }).pickUpOwed(b.bench.policy.keys, b.bench.audit, b.records),
      ]);

      expect(fixture.controllers.restartsOf('checkout')).toHaveLength(2);
      const restartedBy = [first, second].map(
        (report) =>
          report?.outcomes.find((outcome) => outcome.consumer.kind === 'deployment')?.result ??
          'nothing owed',
      );
      expect(restartedBy.filter((result) => result === 'refreshed')).toHaveLength(1);
      expect(
        restartedBy
          .filter((result) => result !== 'refreshed')
          .every((result) => result === 'skipped' || result === 'nothing owed'),
      ).toBe(true);
      const checkout = await cluster.readWorkload('deployments', 'checkout');
      expect(owedRestarts(checkout)).toEqual([]);
      expect(checkout.metadata?.annotations?.[RESTARTED_FOR]?.split(',')).toContain(rotationId);
      const key = b.bench.policy.keys.find((candidate) => candidate.id === ENTRY);
      if (key === undefined) throw new Error('no entry');
      const [, workload] = await consumerStatuses(
        key,
        { lastRotatedAt: summary.outcomes[0]?.rotatedAt, lastRotationId: rotationId },
        cluster.client,
      );
      expect(workload).toMatchObject({
        state: 'current',
        restartedFor: expect.arrayContaining([rotationId]) as unknown,
      });
    });

    it('a leak ignores the closed window, and its restart delivers the deferred value too', async () => {
      const { cluster, bench: b } = await slotEntry();
      await b.run([ENTRY], MANUAL, b.refresher({ restartWindow: closedWindow() }));

      const { summary, report } = await b.run([ENTRY], LEAK, b.refresher({ restartWindow: closedWindow() }));

      expect(summary.outcomes[0]?.result).toBe('rotated');
      expect(report).toMatchObject({ refreshed: 2, deferred: 0 });
      expect(fixture.controllers.restartsOf('checkout')).toHaveLength(2);
      expect(owedRestarts(await cluster.readWorkload('deployments', 'checkout'))).toEqual([]);
    });

    it('refreshConsumers: needed (the default) restarts nothing after it', async () => {
      const { bench: b } = await slotEntry();
      const key = b.bench.key(ENTRY);
      const needed = { ...key, refreshConsumers: 'needed' as const };
      b.bench.policy.keys.splice(b.bench.policy.keys.indexOf(key), 1, needed);

      const { summary, report } = await b.run([ENTRY], MANUAL, b.refresher({ restartWindow: OPEN }));

      expect(summary.rotated).toBe(1);
      expect(report).toBeUndefined();
      expect(fixture.controllers.restartsOf('checkout')).toHaveLength(1);
    });
  });

  describe('order and the cap', () => {
    it('three workloads restart in the order the policy lists them, one at a time with maxConcurrentRestarts: 1', async () => {
      const cluster = await consumerNamespace(kube, temp.path(), (namespace) => [
        { namespace, deployments: ['api', 'worker'], statefulSets: ['ledger'], daemonSets: ['agent'] },
      ]);
      await cluster.createDeployment('api');
      await cluster.createStatefulSet('ledger');
      await cluster.createDaemonSet('agent');
      await cluster.createDeployment('worker');
      const controllers = fixture.standIns(cluster, { rolloutMs: 300 });
      const ns = cluster.namespace;
      const bench = await fixture.start(cluster.client, [
        {
          id: 'key_demo_billing',
          consumers: [
            { kind: 'deployment', namespace: ns, name: 'api' },
            { kind: 'statefulSet', namespace: ns, name: 'ledger' },
          ],
        },
        {
          id: 'key_demo_search',
          consumers: [
            { kind: 'daemonSet', namespace: ns, name: 'agent' },
            { kind: 'deployment', namespace: ns, name: 'worker' },
          ],
        },
      ]);

      const { report } = await bench.run(
        ['key_demo_search', 'key_demo_billing'],
        LEAK,
        bench.refresher({ maxConcurrentRestarts: 1 }),
      );

      expect(report).toMatchObject({ refreshed: 4, failed: 0 });
      const order = controllers.restarts.map((restart) => restart.name);
      expect(order).toEqual(['api', 'ledger', 'agent', 'worker']);
      const times = controllers.restarts.map((restart) => restart.atMs);
      // One at a time: each began after the one before had rolled out (300 ms).
      for (let index = 1; index < times.length; index++)
        expect((times[index] ?? 0) - (times[index - 1] ?? 0)).toBeGreaterThanOrEqual(250);
    });
  });
}
