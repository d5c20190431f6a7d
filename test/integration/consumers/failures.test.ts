// What a consumer that cannot be refreshed does to a rotation: nothing (invariant 12). Each kind
// of failure — a workload the chart's Role does not name (403), one that does not exist (404), an
// ExternalSecret that never syncs or reports it cannot, a rollout that never completes, a workload
// under OnDelete, an API server that is down — gets its own code in the audit trail, one alert per
// delivery with the command to run by hand, and leaves the key rotated, its new value stored and
// alive, and nothing rolled again. The Role is the chart's own (helm template), applied as is.
import { ApiException, AppsV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { KubeClient } from '../../../src/consumers/kubernetes/client.ts';
import { loadKubeConfig, NodeKubeClient } from '../../../src/consumers/kubernetes/node-client.ts';
import { WORKLOAD_KINDS } from '../../../src/consumers/kinds/workloads.ts';
import type { ConsumerRef } from '../../../src/policy/consumers.ts';
import { freePort } from '../../support/local-servers.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { kubeApiServer } from '../servers.ts';
import {
  consumerNamespace,
  type ConsumerNamespace,
  type StandInOptions,
} from '../../support/consumer-cluster.ts';
import { LEAK, SCHEDULED, useConsumerBench, type ConsumerBench } from '../../support/consumer-bench.ts';

const server = await kubeApiServer();
const KEY = 'key_demo_billing';

if (server === undefined) {
  describe.skip('consumer failures on a real Kubernetes API server (not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;
  const temp = useTempDir('keyroll-consumer-failures-');
  const fixture = useConsumerBench();

  /** A namespace where the chart's Role names `billing-api-key` and deployment `billing` only. */
  async function setUp(
    consumers: (namespace: string) => ConsumerRef[],
    standIns: StandInOptions = {},
    client?: KubeClient,
  ): Promise<{ cluster: ConsumerNamespace; bench: ConsumerBench }> {
    const cluster = await consumerNamespace(kube, temp.path(), (namespace) => [
      { namespace, externalSecrets: ['billing-api-key'], deployments: ['billing'], statefulSets: ['ledger'] },
    ]);
    await cluster.createExternalSecret('billing-api-key');
    await cluster.createDeployment('billing');
    await cluster.createDeployment('payments');
    fixture.standIns(cluster, standIns);
    const bench = await fixture.start(client ?? cluster.client, [
      { id: KEY, consumers: consumers(cluster.namespace) },
    ]);
    return { cluster, bench };
  }

  /** The rotation stood: rotated, its new value stored and live, and a later scheduled run rolls nothing. */
  async function expectRotationStands(
    b: ConsumerBench,
    summary: { rotated: number; outcomes: { result: string }[] },
  ): Promise<void> {
    expect(summary.rotated).toBe(1);
    expect(summary.outcomes[0]?.result).toBe('rotated');
    const rolls = b.bench.emulator.state.rollCount(KEY);
    const again = await b.run([KEY], SCHEDULED);
    expect(again.summary.rotated).toBe(0);
    expect(b.bench.emulator.state.rollCount(KEY)).toBe(rolls);
  }

  describe("the chart's Role", () => {
    it('lets keyroll get, patch and watch what it names, and nothing else', async () => {
      const { cluster } = await setUp(() => []);
      const apps = cluster.keyroll.makeApiClient(AppsV1Api);
      const objects = cluster.keyroll.makeApiClient(CustomObjectsApi);
      const statusOf = async (call: () => Promise<unknown>): Promise<number | 'allowed'> => {
        try {
          await call();
          return 'allowed';
        } catch (error) {
          if (error instanceof ApiException) return error.code;
          throw error;
        }
      };
      const { namespace } = cluster;
      expect(await statusOf(() => apps.readNamespacedDeployment({ namespace, name: 'billing' }))).toBe(
        'allowed',
      );
      expect(
        await statusOf(() =>
          objects.getNamespacedCustomObject({
            group: 'external-secrets.io',
            version: 'v1',
            namespace,
            plural: 'externalsecrets',
            name: 'billing-api-key',
          }),
        ),
      ).toBe('allowed');
      // What keyroll's wait sends: a watch of the one object, by a metadata.name field selector.
      const watched = await new Promise<string>((resolve) => {
        void cluster.client
          .watch(
            { ...WORKLOAD_KINDS.deployment.resource, namespace, name: 'billing' },
            '0',
            () => undefined,
            AbortSignal.timeout(500),
          )
          .then(
            () => {
              resolve('allowed');
            },
            (error: unknown) => {
              resolve(String(error));
            },
          );
      });
      expect(watched).toBe('allowed');
      expect(await statusOf(() => apps.readNamespacedDeployment({ namespace, name: 'payments' }))).toBe(403);
      expect(await statusOf(() => apps.listNamespacedDeployment({ namespace }))).toBe(403);
      expect(await statusOf(() => apps.deleteNamespacedDeployment({ namespace, name: 'billing' }))).toBe(403);
      expect(
        await statusOf(() =>
          apps.replaceNamespacedDeployment({
            namespace,
            name: 'billing',
            body: { metadata: { name: 'billing' } },
          }),
        ),
      ).toBe(403);
      expect(
        await statusOf(() => apps.readNamespacedDeployment({ namespace: 'default', name: 'billing' })),
      ).toBe(403);
    });

    it('answers 403 for a workload it does not name: KR_CONSUMER_FORBIDDEN, alerted with the command, the others refreshed, the rotation stands', async () => {
      const { cluster, bench: b } = await setUp((namespace) => [
        { kind: 'externalSecret', namespace, name: 'billing-api-key' },
        { kind: 'deployment', namespace, name: 'billing' },
        { kind: 'deployment', namespace, name: 'payments' },
      ]);

      const { summary, report } = await b.run([KEY], LEAK);

      expect(report).toMatchObject({ refreshed: 2, failed: 1 });
      const [failed] = b.events('consumer.failed');
      expect(failed).toMatchObject({
        consumerKind: 'deployment',
        namespace: cluster.namespace,
        name: 'payments',
        errorCode: 'KR_CONSUMER_FORBIDDEN',
      });
      expect(String(failed?.nextAction)).toContain(
        `kubectl rollout restart deployment/payments -n ${cluster.namespace}`,
      );
      expect(b.bench.alerter.alerts).toHaveLength(1);
      expect(b.bench.alerter.alerts[0]?.alert).toMatchObject({
        severity: 'error',
        step: 'consumers',
        errorCode: 'KR_CONSUMER_FORBIDDEN',
        keyId: KEY,
      });
      expect(b.bench.alerter.alerts[0]?.alert.nextAction).toContain('consumerAccess');
      expect(fixture.controllers.restartsOf('billing')).toHaveLength(1);
      expect(fixture.controllers.restartsOf('payments')).toHaveLength(0);
      await expectRotationStands(b, summary);
    });
  });

  it('a workload that does not exist: KR_CONSUMER_NOT_FOUND', async () => {
    const { bench: b } = await setUp((namespace) => [{ kind: 'statefulSet', namespace, name: 'ledger' }]);

    const { summary, report } = await b.run([KEY], LEAK);

    expect(report).toMatchObject({ failed: 1 });
    expect(b.events('consumer.failed')[0]).toMatchObject({
      consumerKind: 'statefulSet',
      name: 'ledger',
      errorCode: 'KR_CONSUMER_NOT_FOUND',
    });
    await expectRotationStands(b, summary);
  });

  it('an ExternalSecret that never syncs: KR_CONSUMER_TIMEOUT after syncTimeout, and the Deployment not restarted onto the old value (KR_CONSUMER_SYNC_BLOCKED)', async () => {
    const { bench: b } = await setUp(
      (namespace) => [
        { kind: 'externalSecret', namespace, name: 'billing-api-key' },
        { kind: 'deployment', namespace, name: 'billing' },
      ],
      { ignoredSyncs: new Set(['billing-api-key']) },
    );
    const refresher = b.refresher({ syncTimeoutMs: 1_500 });

    const { summary, report } = await b.run([KEY], LEAK, refresher);

    expect(report).toMatchObject({ failed: 2, refreshed: 0 });
    const [failed, blocked] = b.events('consumer.failed');
    expect(failed).toMatchObject({ consumerKind: 'externalSecret', errorCode: 'KR_CONSUMER_TIMEOUT' });
    expect(String(failed?.nextAction)).toContain('kubectl annotate externalsecret billing-api-key');
    expect(String(failed?.nextAction)).toContain('force-sync=$(date +%s) --overwrite');
    expect(blocked).toMatchObject({
      consumerKind: 'deployment',
      name: 'billing',
      errorCode: 'KR_CONSUMER_SYNC_BLOCKED',
    });
    expect(fixture.controllers.restartsOf('billing')).toHaveLength(0);
    await expectRotationStands(b, summary);
  });

  it('an ExternalSecret that reports it cannot sync: KR_CONSUMER_SYNC_FAILED at once, with its message', async () => {
    const { bench: b } = await setUp(
      (namespace) => [{ kind: 'externalSecret', namespace, name: 'billing-api-key' }],
      { failingSyncs: new Set(['billing-api-key']) },
    );
    const refresher = b.refresher({ syncTimeoutMs: 20_000 });

    const began = Date.now();
    const { summary, report } = await b.run([KEY], LEAK, refresher);

    expect(Date.now() - began).toBeLessThan(10_000);
    expect(report).toMatchObject({ failed: 1 });
    expect(b.events('consumer.failed')[0]).toMatchObject({ errorCode: 'KR_CONSUMER_SYNC_FAILED' });
    expect(String(b.events('consumer.failed')[0]?.error)).toContain(
      'could not get secret data from provider',
    );
    await expectRotationStands(b, summary);
  });

  it('a rollout that never completes: KR_CONSUMER_TIMEOUT after rolloutTimeout, naming what it last saw', async () => {
    const { bench: b } = await setUp((namespace) => [{ kind: 'deployment', namespace, name: 'billing' }], {
      stuckRollouts: new Set(['billing']),
    });
    const refresher = b.refresher({ rolloutTimeoutMs: 1_500 });

    const { summary, report } = await b.run([KEY], LEAK, refresher);

    expect(report).toMatchObject({ failed: 1 });
    const [failed] = b.events('consumer.failed');
    expect(failed).toMatchObject({ consumerKind: 'deployment', errorCode: 'KR_CONSUMER_TIMEOUT' });
    expect(String(failed?.error)).toContain('0 of 2 replicas updated');
    // The restart itself happened: only the wait ran out.
    expect(fixture.controllers.restartsOf('billing')).toHaveLength(1);
    expect(b.events('consumer.notified')).toHaveLength(1);
    await expectRotationStands(b, summary);
  });

  it('a StatefulSet under OnDelete: restarted, reported as a rollout that cannot complete on its own', async () => {
    const cluster = await consumerNamespace(kube, temp.path(), (namespace) => [
      { namespace, statefulSets: ['ledger'] },
    ]);
    await cluster.createStatefulSet('ledger', { onDelete: true });
    fixture.standIns(cluster);
    const bench = await fixture.start(cluster.client, [
      { id: KEY, consumers: [{ kind: 'statefulSet', namespace: cluster.namespace, name: 'ledger' }] },
    ]);

    const { report } = await bench.run([KEY], LEAK);

    expect(report).toMatchObject({ failed: 1 });
    expect(bench.events('consumer.failed')[0]).toMatchObject({ errorCode: 'KR_CONSUMER_ROLLOUT_FAILED' });
  });

  it('an API server that is down: KR_CONSUMER_UNREACHABLE for each consumer, within the request deadline', async () => {
    const down = loadKubeConfig({});
    down.loadFromOptions({
      clusters: [
        { name: 'down', server: `https://127.0.0.1:${String(await freePort())}`, skipTLSVerify: true },
      ],
      users: [{ name: 'keyroll', token: 'unused' }],
      contexts: [{ name: 'down', cluster: 'down', user: 'keyroll' }],
      currentContext: 'down',
    });
    const { bench: b } = await setUp(
      (namespace) => [
        { kind: 'externalSecret', namespace, name: 'billing-api-key' },
        { kind: 'deployment', namespace, name: 'billing' },
      ],
      {},
      new NodeKubeClient(down, { requestTimeoutMs: 2_000 }),
    );

    const { summary, report } = await b.run([KEY], LEAK);

    expect(report).toMatchObject({ failed: 2 });
    expect(b.events('consumer.failed').map((event) => event.errorCode)).toEqual([
      'KR_CONSUMER_UNREACHABLE',
      'KR_CONSUMER_UNREACHABLE',
    ]);
    expect(b.bench.alerter.alerts).toHaveLength(1);
    await expectRotationStands(b, summary);
  });
}
