// Issue 28, "Beyond": a Deployment Stakater Reloader restarts when its Secret changes
// (`reloader.stakater.com/auto: "true"`), against the real Reloader (v1.4.19, built from the Go
// module proxy by scripts/test-controllers.sh), external-secrets and kube-controller-manager.
// keyroll must not restart it a second time: it waits for Reloader's rollout, proves it (one new
// ReplicaSet, every pod on the stored value) and reports it restarted by Reloader.
import { AppsV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reloaderEnvName } from '../../../src/consumers/kinds/reloader.ts';
import { RESTARTED_AT, RESTARTED_FOR } from '../../../src/consumers/markers.ts';
import { readControllerTools, startRealCluster, type RealCluster } from '../../support/kube-controllers.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { realControllersTools, vaultServer } from '../servers.ts';
import { LEAK } from '../../support/consumer-bench.ts';
import { realConsumers, REPLICAS, type RealConsumers } from './real-cluster.ts';

const ROTATIONS = 2;

const tools = realControllersTools();
const vault = vaultServer();
const installed = tools === undefined ? undefined : await readControllerTools(tools.controllersDir);
const newest = installed?.externalSecrets[0];
const reloader = installed?.reloader;

if (tools === undefined || vault === undefined || installed === undefined || newest === undefined) {
  describe.skip('Stakater Reloader on the real controllers (not built; see the global setup message)', () => {
    it('needs kube-controller-manager, external-secrets and Reloader', () => undefined);
  });
} else {
  const { kubeBinDir } = tools;
  const openBao = vault;
  const temp = useTempDir('keyroll-real-reloader-', 'file');

  describe(`a Deployment Stakater Reloader restarts (Reloader, external-secrets ${newest.version}, kube-controller-manager)`, () => {
    let real: RealCluster | undefined;
    let consumers: RealConsumers;

    beforeAll(async () => {
      // Built by scripts/test-controllers.sh with the rest: its absence is a failure, not a skip.
      if (reloader === undefined)
        throw new Error(`${tools.controllersDir} holds no reloader: run scripts/test-controllers.sh`);
      real = await startRealCluster({
        kubeBinDir,
        tools: installed,
        crds: newest.crds,
        externalSecrets: {
          binary: newest.binary,
          vault: { address: openBao.address, token: openBao.rootToken },
        },
        reloader,
      });
      consumers = await realConsumers(real, openBao, temp.path(), {
        deploymentAnnotations: { 'reloader.stakater.com/auto': 'true' },
      });
    }, 300_000);

    afterAll(async () => {
      await consumers.close();
      await real?.stop();
    });

    it(`after the store that creates the Secret, ${String(ROTATIONS)} leak rotations: Reloader restarts the Deployment once per rotation, keyroll never restarts it, every new pod runs on the stored value, and keyroll reports it restarted by Reloader`, async () => {
      const { bench, keyId, secretName, kubelet, cluster, deployment } = consumers;
      const apps = real?.admin.makeApiClient(AppsV1Api);
      if (apps === undefined) throw new Error('no cluster');
      // The first store creates the Secret, and Reloader (by default, without --reload-on-create)
      // acts only on a change: keyroll waits out reloaderTimeout, then restarts it itself.
      const first = await bench.run([keyId], LEAK);
      expect(first.report).toMatchObject({ refreshed: 2, failed: 0 });
      expect(
        first.report?.outcomes.find((candidate) => candidate.consumer.kind === 'deployment')?.restartedBy,
      ).toBeUndefined();
      const restartedAt = (
        await apps.readNamespacedDeployment({ namespace: cluster.namespace, name: deployment })
      ).spec?.template.metadata?.annotations?.[RESTARTED_AT];
      expect(restartedAt).toBeDefined();
      for (let round = 1; round <= ROTATIONS; round++) {
        const before = new Set(
          (await consumers.replicaSets()).map((replicaSet) => replicaSet.metadata?.name),
        );
        const { summary, report } = await bench.run([keyId], LEAK);
        const context = `round ${String(round)}; controllers said:\n${real?.controllerOutput() ?? ''}`;

        expect(summary.rotated, context).toBe(1);
        expect(report, context).toMatchObject({ refreshed: 2, failed: 0, deferred: 0, skipped: 0 });
        const stored = await consumers.storedDigest();
        expect(await consumers.secretDigest()).toBe(stored);

        // Reloader's change, not keyroll's: the template carries Reloader's variable, and keyroll's restartedAt is the first run's.
        const object = await apps.readNamespacedDeployment({
          namespace: cluster.namespace,
          name: deployment,
        });
        expect(object.spec?.template.metadata?.annotations?.[RESTARTED_AT], context).toBe(restartedAt);
        expect(object.spec?.template.spec?.containers[0]?.env?.map((env) => env.name)).toContain(
          reloaderEnvName(secretName),
        );

        // Exactly one new ReplicaSet (a second restart would make two), every pod of it on the stored value.
        const after = await consumers.replicaSets();
        const created = after.filter((replicaSet) => !before.has(replicaSet.metadata?.name));
        expect(
          created.map((replicaSet) => replicaSet.metadata?.name),
          context,
        ).toHaveLength(1);
        const fresh = created[0]?.metadata?.name ?? '';
        expect(
          after
            .filter((replicaSet) => (replicaSet.spec?.replicas ?? 0) > 0)
            .map((replicaSet) => replicaSet.metadata?.name),
        ).toEqual([fresh]);
        const pods = kubelet.podsOf(fresh);
        expect(pods).toHaveLength(REPLICAS);
        expect(pods.map((pod) => pod.values[`${secretName}/apiKey`])).toEqual(pods.map(() => stored));

        // Reported as Reloader's restart: the outcome, the audit event, and restarted-for recorded
        // (another runner finds it done and restarts nothing).
        const rotationId = summary.outcomes[0]?.rotationId ?? '';
        const outcome = report?.outcomes.find((candidate) => candidate.consumer.kind === 'deployment');
        expect(outcome).toMatchObject({ result: 'refreshed', restartedBy: 'reloader' });
        const refreshed = bench
          .events('consumer.refreshed')
          .filter(
            (event) =>
              event.consumerKind === 'deployment' &&
              Array.isArray(event.rotationIds) &&
              event.rotationIds.includes(rotationId),
          );
        expect(refreshed.map((event) => event.restartedBy)).toEqual(['reloader']);
        // The figures (no assertion): store → keyroll saw Reloader's change, store → its rollout proved.
        console.log(
          `keyroll with Reloader, round ${String(round)}: store → Reloader's change seen ${String(refreshed[0]?.msToNotified)} ms, store → rollout proved ${String(refreshed[0]?.msToRefreshed)} ms`,
        );
        expect(object.metadata?.annotations?.[RESTARTED_FOR]?.split(',') ?? []).toContain(rotationId);
      }
    }, 240_000);
  });
}
