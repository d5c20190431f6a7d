// Issue 28, item 1, against the real controllers: a cluster whose external-secrets release serves
// only external-secrets.io/v1beta1 (0.15 and older; v1 came in 0.16.0). Only that release's CRD
// bundle is installed, beside the real kube-controller-manager: no external-secrets controller of it
// runs (none is built: what keyroll gets wrong here is its own request, before any controller could
// answer), so nothing syncs, and the Secret still holds the value from before the leak.
// keyroll must find the version the API server serves (not report the ExternalSecret missing),
// and must not restart the Deployment onto the value its Secret still holds, nor report it refreshed.
import { AppsV1Api, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FORCE_SYNC } from '../../../src/consumers/kinds/external-secret.ts';
import { RESTARTED_AT } from '../../../src/consumers/markers.ts';
import { readControllerTools, startRealCluster, type RealCluster } from '../../support/kube-controllers.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { waitFor } from '../../support/wait-for.ts';
import { realControllersTools, vaultServer } from '../servers.ts';
import { LEAK } from '../../support/consumer-bench.ts';
import { realConsumers, REPLICAS, type RealConsumers } from './real-cluster.ts';

const tools = realControllersTools();
const vault = vaultServer();
const installed = tools === undefined ? undefined : await readControllerTools(tools.controllersDir);
const crdsOnly = installed?.crdsOnly[0];

if (tools === undefined || vault === undefined || installed === undefined || crdsOnly === undefined) {
  describe.skip('a cluster serving only external-secrets.io/v1beta1 (not built; see the global setup message)', () => {
    it('needs kube-controller-manager and a v1beta1-only CRD bundle', () => undefined);
  });
} else {
  const { kubeBinDir } = tools;
  const openBao = vault;
  const temp = useTempDir('keyroll-real-v1beta1-', 'file');

  describe(`a cluster whose external-secrets CRDs (${crdsOnly.version}) serve only external-secrets.io/v1beta1`, () => {
    let real: RealCluster | undefined;
    let consumers: RealConsumers;

    beforeAll(async () => {
      real = await startRealCluster({ kubeBinDir, tools: installed, crds: crdsOnly.crds });
      consumers = await realConsumers(real, openBao, temp.path(), { apiVersion: 'v1beta1' });
      // The Secret as the release synced it before the leak, and the Deployment's pods on it.
      const core = real.admin.makeApiClient(CoreV1Api);
      await core.createNamespacedSecret({
        namespace: consumers.cluster.namespace,
        body: {
          metadata: { name: consumers.secretName },
          stringData: { apiKey: 'the-value-before-the-leak' },
        },
      });
      const apps = real.admin.makeApiClient(AppsV1Api);
      await waitFor(
        async () =>
          (
            await apps.readNamespacedDeployment({
              namespace: consumers.cluster.namespace,
              name: consumers.deployment,
            })
          ).status?.availableReplicas === REPLICAS,
        'the Deployment available on the old value',
        { timeoutMs: 60_000, intervalMs: 50 },
      );
    }, 300_000);

    afterAll(async () => {
      await consumers.close();
      await real?.stop();
    });

    it('keyroll asks the v1beta1 ExternalSecret to sync (not KR_CONSUMER_NOT_FOUND) and, with no sync, neither restarts the Deployment onto the old value nor reports it refreshed', async () => {
      const { bench, keyId, cluster, deployment, secretName } = consumers;
      const admin = real?.admin;
      if (admin === undefined) throw new Error('no cluster');
      const apps = admin.makeApiClient(AppsV1Api);
      const before = await apps.readNamespacedDeployment({ namespace: cluster.namespace, name: deployment });
      const replicaSetsBefore = (await consumers.replicaSets())
        .map((replicaSet) => replicaSet.metadata?.name)
        .sort();

      const { summary, report } = await bench.run([keyId], LEAK);

      expect(summary.rotated).toBe(1);
      const sync = report?.outcomes.find((outcome) => outcome.consumer.kind === 'externalSecret');
      expect(sync?.result).toBe('failed');
      expect(sync?.errorCode).not.toBe('KR_CONSUMER_NOT_FOUND');
      // keyroll found the version served and asked that object to sync.
      const externalSecret = (await admin.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
        group: 'external-secrets.io',
        version: 'v1beta1',
        plural: 'externalsecrets',
        namespace: cluster.namespace,
        name: secretName,
      })) as { metadata?: { annotations?: Record<string, string> } };
      expect(externalSecret.metadata?.annotations?.[FORCE_SYNC]).toMatch(/^\d+$/);

      // The Deployment: not restarted (its pods would start on the old value), not reported refreshed.
      const after = await apps.readNamespacedDeployment({ namespace: cluster.namespace, name: deployment });
      expect(after.spec?.template.metadata?.annotations?.[RESTARTED_AT]).toBe(
        before.spec?.template.metadata?.annotations?.[RESTARTED_AT],
      );
      expect((await consumers.replicaSets()).map((replicaSet) => replicaSet.metadata?.name).sort()).toEqual(
        replicaSetsBefore,
      );
      expect(report?.outcomes.find((outcome) => outcome.consumer.kind === 'deployment')?.result).not.toBe(
        'refreshed',
      );
      expect(
        bench.events('consumer.refreshed').filter((event) => event.consumerKind === 'deployment'),
      ).toEqual([]);
    }, 120_000);
  });
}
