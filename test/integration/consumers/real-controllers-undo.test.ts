// Issue 28, item 4, against the real controllers: the deployment controller copies a Deployment's
// annotations onto its ReplicaSets, and `kubectl rollout undo` copies the previous ReplicaSet's back
// onto the Deployment, keyroll's markers with them. After an undo, keyroll's next run with no key
// due must not restart the Deployment for a rotation it already restarted it for.
import { AppsV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESTARTED_AT } from '../../../src/consumers/markers.ts';
import { readControllerTools, startRealCluster, type RealCluster } from '../../support/kube-controllers.ts';
import { rolledOut, rolloutUndo } from '../../support/kube-rollout-undo.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { waitFor } from '../../support/wait-for.ts';
import { realControllersTools, vaultServer } from '../servers.ts';
import { LEAK, SCHEDULED } from '../../support/consumer-bench.ts';
import { realConsumers, REPLICAS, type RealConsumers } from './real-cluster.ts';

const tools = realControllersTools();
const vault = vaultServer();
const installed = tools === undefined ? undefined : await readControllerTools(tools.controllersDir);
const newest = installed?.externalSecrets[0];

if (tools === undefined || vault === undefined || installed === undefined || newest === undefined) {
  describe.skip('kubectl rollout undo on the real deployment controller (not built; see the global setup message)', () => {
    it('needs kube-controller-manager and external-secrets', () => undefined);
  });
} else {
  const { kubeBinDir } = tools;
  const openBao = vault;
  const temp = useTempDir('keyroll-real-undo-', 'file');

  describe(`kubectl rollout undo after keyroll's restarts (external-secrets ${newest.version}, kube-controller-manager)`, () => {
    let real: RealCluster | undefined;
    let consumers: RealConsumers;

    beforeAll(async () => {
      real = await startRealCluster({
        kubeBinDir,
        tools: installed,
        crds: newest.crds,
        externalSecrets: {
          binary: newest.binary,
          vault: { address: openBao.address, token: openBao.rootToken },
        },
      });
      consumers = await realConsumers(real, openBao, temp.path());
    }, 300_000);

    afterAll(async () => {
      await consumers.close();
      await real?.stop();
    });

    it("after an undo, keyroll's next run with no key due restarts nothing", async () => {
      const { bench, keyId, cluster, deployment } = consumers;
      const admin = real?.admin;
      if (admin === undefined) throw new Error('no cluster');
      const apps = admin.makeApiClient(AppsV1Api);
      for (let round = 0; round < 2; round++)
        expect((await bench.run([keyId], LEAK)).report).toMatchObject({ refreshed: 2, failed: 0 });
      const lastStore = Math.max(...bench.events('key.stored').map((event) => Date.parse(event.time)));

      await rolloutUndo(apps, cluster.namespace, deployment);
      await waitFor(
        async () =>
          rolledOut(
            await apps.readNamespacedDeployment({ namespace: cluster.namespace, name: deployment }),
            REPLICAS,
          ),
        'the rollback rolled out',
        { timeoutMs: 60_000, intervalMs: 50 },
      );
      const undone = await apps.readNamespacedDeployment({ namespace: cluster.namespace, name: deployment });
      const replicaSets = (await consumers.replicaSets())
        .map((replicaSet) => replicaSet.metadata?.name)
        .sort();

      // The next `keyroll run`, as execute-run does it: the run, then the restarts owed from
      // earlier runs. Its timeouts make an owed entry due 6 s after its store (sync + rollout);
      // the run starts after that, so whatever the undo brought back is due.
      const refresher = bench.refresher({ syncTimeoutMs: 1_000, rolloutTimeoutMs: 5_000 });
      await waitFor(() => Date.now() > lastStore + 7_000, 'the owed entries due', {
        timeoutMs: 30_000,
        intervalMs: 100,
      });
      const { summary } = await bench.run([keyId], SCHEDULED, refresher);
      await refresher.pickUpOwed(bench.bench.policy.keys, bench.bench.audit, bench.records);

      expect(summary.rotated).toBe(0);
      const after = await apps.readNamespacedDeployment({ namespace: cluster.namespace, name: deployment });
      expect(after.spec?.template.metadata?.annotations?.[RESTARTED_AT]).toBe(
        undone.spec?.template.metadata?.annotations?.[RESTARTED_AT],
      );
      // The pod template is untouched: no restart. (The generation may move: settling the entry the
      // undo brought back removes it from the Deployment's annotations, and a Deployment's
      // generation counts annotation changes too.)
      expect(after.spec?.template).toEqual(undone.spec?.template);
      expect((await consumers.replicaSets()).map((replicaSet) => replicaSet.metadata?.name).sort()).toEqual(
        replicaSets,
      );
    }, 180_000);
  });
}
