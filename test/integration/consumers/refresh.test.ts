// The consumers' refresh against a real Kubernetes API server (invariant 12): what keyroll writes
// lands as kubectl writes it, in the order a leak needs (sync, then restart, then the rollout),
// once per workload however many keys share it; and a consumer that lags or fails never changes
// the rotation. The stand-in controllers (test/support/consumer-cluster.ts) play external-secrets and the workload
// controllers: this API server has neither. Traced, the refresh is one span with a span per consumer.
import { beforeEach, describe, expect, it } from 'vitest';
import { FORCE_SYNC } from '../../../src/consumers/kinds/external-secret.ts';
import { restartWorkload } from '../../../src/consumers/kinds/workload.ts';
import { workloadRef } from '../../../src/consumers/kinds/workloads.ts';
import { RESTART_OWED, RESTARTED_AT, RESTARTED_FOR } from '../../../src/consumers/markers.ts';
import { childrenOf, onlySpan, startOtlpReceiver, startTracingTo } from '../../support/otlp-receiver.ts';
import { expectNoSecrets } from '../../support/secret-scan.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { kubeApiServer } from '../servers.ts';
import {
  consumerNamespace,
  type StandInControllers,
  type ConsumerNamespace,
} from '../../support/consumer-cluster.ts';
import { LEAK, useConsumerBench, type ConsumerBench } from '../../support/consumer-bench.ts';

/** How far two spans' clocks may disagree (each is anchored to Date.now() when it starts). */
const CLOCK_ANCHOR_SLACK_NS = 1_000_000n;

const server = await kubeApiServer();

if (server === undefined) {
  describe.skip('consumers on a real Kubernetes API server (not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;
  const temp = useTempDir('keyroll-consumers-');

  describe('a leak of a key with an ExternalSecret and a Deployment', () => {
    let cluster: ConsumerNamespace;
    let controllers: StandInControllers;
    let bench: ConsumerBench;
    const fixture = useConsumerBench();

    beforeEach(async () => {
      cluster = await consumerNamespace(kube, temp.path(), (namespace) => [
        { namespace, externalSecrets: ['billing-api-key'], deployments: ['billing'] },
      ]);
      await cluster.createExternalSecret('billing-api-key');
      await cluster.createDeployment('billing');
      controllers = fixture.standIns(cluster, { syncDelayMs: 150, rolloutMs: 150 });
      bench = await fixture.start(cluster.client, [
        {
          id: 'key_demo_billing',
          consumers: [
            { kind: 'externalSecret', namespace: cluster.namespace, name: 'billing-api-key' },
            { kind: 'deployment', namespace: cluster.namespace, name: 'billing' },
          ],
        },
      ]);
    });

    it('annotates force-sync and restarts as kubectl does, the restart after the sync, and waits for the rollout', async () => {
      const before = Date.now();
      const { summary, report } = await bench.run(['key_demo_billing'], LEAK);

      expect(summary.rotated).toBe(1);
      expect(report).toMatchObject({ refreshed: 2, failed: 0, deferred: 0, skipped: 0 });
      const es = await cluster.readExternalSecret('billing-api-key');
      // `kubectl annotate es billing-api-key force-sync=$(date +%s) --overwrite`: unix seconds.
      expect(es.metadata?.annotations?.[FORCE_SYNC]).toMatch(/^\d{10}$/);
      const deployment = await cluster.readWorkload('deployments', 'billing');
      // `kubectl rollout restart`: RFC 3339 in whole seconds on the pod template.
      const restartedAt = deployment.spec?.template?.metadata?.annotations?.[RESTARTED_AT] ?? '';
      expect(restartedAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      expect(Date.parse(restartedAt)).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000);
      const rotationId = summary.outcomes[0]?.rotationId ?? '';
      expect(deployment.metadata?.annotations?.[RESTARTED_FOR]).toBe(rotationId);
      expect(deployment.metadata?.annotations?.[RESTART_OWED]).toBeUndefined();

      const [restart] = controllers.restartsOf('billing');
      const synced = controllers.syncs.get('billing-api-key') ?? [];
      expect(controllers.restartsOf('billing')).toHaveLength(1);
      expect(restart?.restartedAt).toBe(restartedAt);
      // The restart came after external-secrets wrote the new value into the Secret.
      expect(synced.length).toBeGreaterThan(0);
      expect(restart?.atMs).toBeGreaterThan(Math.min(...synced));

      const refreshed = bench.events('consumer.refreshed');
      expect(refreshed.map((event) => event.consumerKind).sort()).toEqual(['deployment', 'externalSecret']);
      expect(
        refreshed.every(
          (event) => typeof event.msToRefreshed === 'number' && event.rotationIds !== undefined,
        ),
      ).toBe(true);
      expect(bench.events('consumer.notified')).toHaveLength(2);
      expect(bench.bench.alerter.alerts).toEqual([]);
    });

    it('traced (issue 23 §4): the sync and the restart are spans beneath one consumer refresh, naming each object and its outcome, with no secret in any', async () => {
      const otlp = await startOtlpReceiver();
      const traced = await startTracingTo(otlp, { OTEL_SERVICE_NAME: 'keyroll-consumers-test' });
      const { summary, report } = await bench.run(['key_demo_billing'], LEAK).finally(async () => {
        await traced.stop();
        await otlp.close();
      });
      expect(report).toMatchObject({ refreshed: 2, failed: 0 });
      expect(traced.warnings).toEqual([]);
      expectNoSecrets(otlp.bodies, bench.bench.emulator.state.mintedSecrets(), 'exported spans');
      const rotationId = summary.outcomes[0]?.rotationId;
      const { spans } = otlp;
      const refresh = onlySpan(spans, 'consumer refresh');
      expect(refresh.attributes).toMatchObject({
        'keyroll.consumers.source': 'run',
        'keyroll.key.ids': ['key_demo_billing'],
        'keyroll.rotation.ids': [rotationId],
        'keyroll.consumers.refreshed': 2,
        'keyroll.consumers.failed': 0,
      });
      const sync = onlySpan(spans, 'externalSecret sync');
      const restart = onlySpan(spans, 'workload restart');
      expect([sync.parentSpanId, restart.parentSpanId]).toEqual([refresh.spanId, refresh.spanId]);
      const names = {
        'keyroll.consumer.namespace': cluster.namespace,
        'keyroll.rotation.ids': [rotationId],
        'keyroll.consumer.result': 'refreshed',
      };
      expect(sync.attributes).toEqual({
        ...names,
        'keyroll.consumer.kind': 'externalSecret',
        'keyroll.consumer.name': 'billing-api-key',
      });
      expect(restart.attributes).toEqual({
        ...names,
        'keyroll.consumer.kind': 'deployment',
        'keyroll.consumer.name': 'billing',
      });
      // The workload restarts once its ExternalSecret synced; the API server's requests are beneath it.
      // OpenTelemetry anchors each span's clock to Date.now() (whole milliseconds) when the span
      // starts, so two spans' instants can disagree by up to a millisecond: the restart starts
      // within microseconds of the sync's end, and may read as up to 1 ms before it.
      expect(restart.startNs + CLOCK_ANCHOR_SLACK_NS >= sync.endNs).toBe(true);
      expect(restart.endNs > sync.endNs).toBe(true);
      expect(childrenOf(spans, restart).some((span) => span.kind === 3)).toBe(true);
    });

    it('a second runner restarting for the same rotation finds it done (restarted-for, under the resourceVersion)', async () => {
      const { summary } = await bench.run(['key_demo_billing'], LEAK);
      const rotationId = summary.outcomes[0]?.rotationId ?? '';

      const answer = await restartWorkload(
        cluster.client,
        workloadRef('deployment', cluster.namespace, 'billing'),
        [rotationId],
        { now: () => Date.now() },
      );

      expect(answer).toEqual({ restarted: false });
      expect(controllers.restartsOf('billing')).toHaveLength(1);
    });
  });

  describe('twenty rotated keys sharing one workload', () => {
    const KEYS = Array.from({ length: 20 }, (_, index) => `key_shared_${String(index).padStart(2, '0')}`);
    let cluster: ConsumerNamespace;
    let controllers: StandInControllers;
    let bench: ConsumerBench;
    const fixture = useConsumerBench();

    beforeEach(async () => {
      const secrets = KEYS.map((id) => id.replace(/_/g, '-'));
      cluster = await consumerNamespace(kube, temp.path(), (namespace) => [
        { namespace, externalSecrets: secrets, deployments: ['gateway'] },
      ]);
      for (const name of secrets) await cluster.createExternalSecret(name);
      await cluster.createDeployment('gateway', 3);
      controllers = fixture.standIns(cluster, { syncDelayMs: 100, rolloutMs: 100 });
      bench = await fixture.start(
        cluster.client,
        KEYS.map((id) => ({
          id,
          consumers: [
            { kind: 'externalSecret', namespace: cluster.namespace, name: id.replace(/_/g, '-') },
            { kind: 'deployment', namespace: cluster.namespace, name: 'gateway' },
          ],
        })),
      );
    });

    it('restart it once, after all twenty are stored and their ExternalSecrets synced', async () => {
      const { summary, report } = await bench.run(KEYS, LEAK);

      expect(summary.rotated).toBe(20);
      expect(report).toMatchObject({ failed: 0, refreshed: 21 });
      const restarts = controllers.restartsOf('gateway');
      expect(restarts).toHaveLength(1);
      const lastSync = Math.max(
        ...KEYS.map((id) => Math.min(...(controllers.syncs.get(id.replace(/_/g, '-')) ?? [Number.NaN]))),
      );
      expect(restarts[0]?.atMs).toBeGreaterThan(lastSync);
      const gateway = await cluster.readWorkload('deployments', 'gateway');
      expect(new Set(gateway.metadata?.annotations?.[RESTARTED_FOR]?.split(','))).toEqual(
        new Set(summary.outcomes.map((outcome) => outcome.rotationId)),
      );
      expect(
        bench.events('consumer.refreshed').filter((event) => event.consumerKind === 'deployment'),
      ).toHaveLength(1);
    });
  });
}
