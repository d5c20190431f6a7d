// Restart debts (keyroll.io/restart-owed) are claims written on workloads, and the deployment
// controller and `kubectl rollout undo` move them around (deployment-history.ts, a stand-in named
// as such). A pick-up of owed restarts acts only on an entry whose key lists the workload, whose
// rotation is the key's last as its record says, and whose pods did not roll since (issue 27
// finding 3, issue 28 item 4); every other entry is settled without a sync or a restart, and a
// forged one is audited as such.
import { describe, expect, it } from 'vitest';
import { owedRestarts, RESTART_OWED, type OwedRestart } from '../../../src/consumers/markers.ts';
import { consumerStatuses } from '../../../src/consumers/status.ts';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { useTempDir } from '../../support/temp-dir.ts';
import { kubeApiServer } from '../servers.ts';
import { consumerNamespace } from '../../support/consumer-cluster.ts';
import { DeploymentHistory } from './deployment-history.ts';
import { LEAK, useConsumerBench } from '../../support/consumer-bench.ts';

const server = await kubeApiServer();
/** Settings under which every owed entry is stale at once (older than syncTimeout + rolloutTimeout). */
const STALE_AT_ONCE = { syncTimeoutMs: 1, rolloutTimeoutMs: 1 };

if (server === undefined) {
  describe.skip('restart debts on a real Kubernetes API server (not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;
  const temp = useTempDir('keyroll-restart-debts-');
  const fixture = useConsumerBench();

  it('kubectl rollout undo brings back an owed entry keyroll already restarted for: no second restart, settled, status not owed', async () => {
    const cluster = await consumerNamespace(kube, temp.path(), (namespace) => [
      { namespace, externalSecrets: ['checkout-api-key'], deployments: ['checkout'] },
    ]);
    await cluster.createExternalSecret('checkout-api-key');
    await cluster.createDeployment('checkout');
    fixture.standIns(cluster, { syncDelayMs: 20, rolloutMs: 20 });
    const history = new DeploymentHistory(cluster);
    await history.syncReplicaSets('checkout');
    let restartPatches = 0;
    const observed = history.observing(cluster.client);
    // keyroll's restarts that landed (a patch refused with 409 is tried again and is not one).
    const counting = {
      ...observed,
      patch: async (...args: Parameters<typeof observed.patch>) => {
        const patched = await observed.patch(...args);
        if (args[2] === 'strategic') restartPatches += 1;
        return patched;
      },
    };
    const es = { kind: 'externalSecret' as const, namespace: cluster.namespace, name: 'checkout-api-key' };
    const deployment = { kind: 'deployment' as const, namespace: cluster.namespace, name: 'checkout' };
    const bench = await fixture.start(counting, [{ id: 'key_demo_billing', consumers: [es, deployment] }]);
    const { summary, report } = await bench.run(['key_demo_billing'], LEAK);
    const rotationId = summary.outcomes[0]?.rotationId ?? '';
    expect(report).toMatchObject({ refreshed: 2, failed: 0 });
    expect(restartPatches).toBe(1);
    // The controller copied the entry onto the ReplicaSet the restart left behind.
    const [before] = await history.replicaSets('checkout');
    expect(JSON.parse(before?.metadata?.annotations?.[RESTART_OWED] ?? '[]')).toEqual([
      expect.objectContaining({ rotationId }),
    ]);

    await history.rolloutUndo('checkout');

    // The undo copied it back: the Deployment claims a restart owed for the rotation it had.
    expect(
      owedRestarts(await cluster.readWorkload('deployments', 'checkout')).map((entry) => entry.rotationId),
    ).toEqual([rotationId]);
    const key = bench.bench.policy.keys[0];
    if (key === undefined) throw new Error('no key');
    const [, workloadStatus] = await consumerStatuses(
      key,
      { lastRotatedAt: summary.outcomes[0]?.rotatedAt, lastRotationId: rotationId },
      cluster.client,
    );
    expect(workloadStatus?.state).not.toBe('owed');

    const picked = await bench
      .refresher(STALE_AT_ONCE, counting)
      .pickUpOwed(bench.bench.policy.keys, bench.bench.audit, bench.records);

    expect(picked).toBeUndefined();
    expect(restartPatches).toBe(1);
    expect(owedRestarts(await cluster.readWorkload('deployments', 'checkout'))).toEqual([]);
    expect(bench.events('consumers.owed-settled')).toEqual([
      expect.objectContaining({ rotationId, keyId: 'key_demo_billing', why: 'rolled-since' }),
    ]);
    expect(bench.events('consumers.owed-forged')).toEqual([]);
  });

  it("forged entries (another key's, a future store, a rotation the record does not know) sync and restart nothing, alert nothing, and are settled", async () => {
    const cluster = await consumerNamespace(kube, temp.path(), (namespace) => [
      {
        namespace,
        externalSecrets: ['checkout-api-key', 'billing-api-key'],
        deployments: ['checkout', 'billing'],
      },
    ]);
    for (const name of ['checkout-api-key', 'billing-api-key']) await cluster.createExternalSecret(name);
    for (const name of ['checkout', 'billing']) await cluster.createDeployment(name);
    const controllers = fixture.standIns(cluster, { syncDelayMs: 20, rolloutMs: 20 });
    const ns = cluster.namespace;
    const bench = await fixture.start(cluster.client, [
      {
        id: 'key_demo_billing',
        consumers: [
          { kind: 'externalSecret', namespace: ns, name: 'checkout-api-key' },
          { kind: 'deployment', namespace: ns, name: 'checkout' },
        ],
      },
      {
        id: 'key_demo_search',
        consumers: [
          { kind: 'externalSecret', namespace: ns, name: 'billing-api-key' },
          { kind: 'deployment', namespace: ns, name: 'billing' },
        ],
      },
    ]);
    const { summary } = await bench.run(['key_demo_billing', 'key_demo_search'], LEAK);
    const rotationOf = (id: string): string =>
      summary.outcomes.find((outcome) => outcome.keyId === id)?.rotationId ?? '';
    const checkoutRotation = rotationOf('key_demo_billing');
    const billingRotation = rotationOf('key_demo_search');
    const syncsBefore = controllers.syncs.get('billing-api-key')?.length ?? 0;
    const checkoutSyncsBefore = controllers.syncs.get('checkout-api-key')?.length ?? 0;
    const restartsBefore = controllers.restarts.length;
    const alertsBefore = bench.bench.alerter.alerts.length;
    const old = new Date(Date.now() - 60_000).toISOString();
    const forged: OwedRestart[] = [
      // The other team's key, which does not list checkout, with its real last rotation.
      { rotationId: billingRotation, keyId: 'key_demo_search', urgent: true, storedAt: old, deferred: true },
      // checkout's own key, stored "tomorrow": a sync after it could never come.
      {
        rotationId: checkoutRotation,
        keyId: 'key_demo_billing',
        urgent: true,
        storedAt: new Date(Date.now() + 86_400_000).toISOString(),
        deferred: true,
      },
      // checkout's own key, a rotation its record never knew.
      {
        rotationId: '00000000-0000-4000-8000-000000000000',
        keyId: 'key_demo_billing',
        urgent: true,
        storedAt: new Date().toISOString(),
        deferred: true,
      },
    ];
    await cluster.admin.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
      {
        group: 'apps',
        version: 'v1',
        namespace: ns,
        plural: 'deployments',
        name: 'checkout',
        body: { metadata: { annotations: { [RESTART_OWED]: JSON.stringify(forged) } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );

    const picked = await bench
      .refresher(STALE_AT_ONCE)
      .pickUpOwed(bench.bench.policy.keys, bench.bench.audit, bench.records);
    await new Promise((resolve) => setTimeout(resolve, 100));

    expect(picked).toBeUndefined();
    expect(controllers.syncs.get('billing-api-key')?.length ?? 0).toBe(syncsBefore);
    expect(controllers.syncs.get('checkout-api-key')?.length ?? 0).toBe(checkoutSyncsBefore);
    expect(controllers.restarts.length).toBe(restartsBefore);
    expect(bench.bench.alerter.alerts.length).toBe(alertsBefore);
    expect(owedRestarts(await cluster.readWorkload('deployments', 'checkout'))).toEqual([]);
    expect(bench.events('consumers.owed-forged').map((event) => [event.keyId, event.why])).toEqual(
      expect.arrayContaining([
        ['key_demo_search', 'not-a-consumer'],
        ['key_demo_billing', 'future'],
        ['key_demo_billing', 'unknown-rotation'],
      ]),
    );
    expect(bench.events('consumers.owed-forged')).toHaveLength(3);
  });
}
