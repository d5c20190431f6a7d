// Issue 28, item 4, against the real controllers: the deployment controller copies a Deployment's
// annotations onto its ReplicaSets, and `kubectl rollout undo` copies the previous ReplicaSet's back
// onto the Deployment, keyroll's markers with them. After an undo, keyroll's next run with no key
// due must not restart the Deployment for a rotation it already restarted it for.
import { AppsV1Api, PatchStrategy, setHeaderOptions, type V1Deployment } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RESTARTED_AT } from '../../../src/consumers/markers.ts';
import { readControllerTools, startRealCluster, type RealCluster } from '../../support/kube-controllers.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { waitFor } from '../../support/wait-for.ts';
import { realControllersTools, vaultServer } from '../servers.ts';
import { LEAK, SCHEDULED } from './harness.ts';
import { realConsumers, REPLICAS, type RealConsumers } from './real-cluster.ts';

const tools = realControllersTools();
const vault = vaultServer();
const installed = tools === undefined ? undefined : await readControllerTools(tools.controllersDir);
const newest = installed?.externalSecrets[0];

const REVISION = 'deployment.kubernetes.io/revision';
/** kubectl's annotationsToSkip (k8s.io/kubectl pkg/polymorphichelpers/rollback.go): kept from the Deployment, never copied from the ReplicaSet. */
const KEPT_BY_UNDO = ['kubectl.kubernetes.io/last-applied-configuration', REVISION, 'deployment.kubernetes.io/revision-history', 'deployment.kubernetes.io/desired-replicas', 'deployment.kubernetes.io/max-replicas', 'deprecated.deployment.rollback.to'];

/**
 * `kubectl rollout undo deployment/NAME` as kubectl v1.31 does it (DeploymentRollbacker.Rollback):
 * the ReplicaSet of the previous revision gives back its pod template (without pod-template-hash)
 * and its annotations, in one JSON patch of the Deployment.
 */
async function rolloutUndo(apps: AppsV1Api, namespace: string, name: string): Promise<void> {
  const deployment = await apps.readNamespacedDeployment({ namespace, name });
  const { items } = await apps.listNamespacedReplicaSet({ namespace });
  const revisions = items
    .filter((replicaSet) => replicaSet.metadata?.ownerReferences?.some((owner) => owner.uid === deployment.metadata?.uid) === true)
    .map((replicaSet) => ({ replicaSet, revision: Number(replicaSet.metadata?.annotations?.[REVISION] ?? '0') }))
    .sort((a, b) => b.revision - a.revision);
  const previous = revisions[1]?.replicaSet;
  if (previous === undefined) throw new Error(`${name} has no previous revision to undo to`);
  const template = structuredClone(previous.spec?.template);
  delete template?.metadata?.labels?.['pod-template-hash'];
  const annotations: Record<string, string> = {};
  for (const key of KEPT_BY_UNDO) {
    const value = deployment.metadata?.annotations?.[key];
    if (value !== undefined) annotations[key] = value;
  }
  for (const [key, value] of Object.entries(previous.metadata?.annotations ?? {})) if (!KEPT_BY_UNDO.includes(key)) annotations[key] = value;
  await apps.patchNamespacedDeployment(
    {
      namespace,
      name,
      body: [
        { op: 'replace', path: '/spec/template', value: template },
        { op: 'replace', path: '/metadata/annotations', value: annotations },
      ],
    },
    setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
  );
}

function rolledOut(deployment: V1Deployment): boolean {
  const { status, metadata } = deployment;
  return (status?.observedGeneration ?? 0) >= (metadata?.generation ?? 1) && status?.updatedReplicas === REPLICAS && status.availableReplicas === REPLICAS && status.replicas === REPLICAS;
}

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
      real = await startRealCluster({ kubeBinDir, tools: installed, crds: newest.crds, externalSecrets: { binary: newest.binary, vault: { address: openBao.address, token: openBao.rootToken } } });
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
      for (let round = 0; round < 2; round++) expect((await bench.run([keyId], LEAK)).report).toMatchObject({ refreshed: 2, failed: 0 });
      const lastStore = Math.max(...bench.events('key.stored').map((event) => Date.parse(event.time)));

      await rolloutUndo(apps, cluster.namespace, deployment);
      await waitFor(async () => rolledOut(await apps.readNamespacedDeployment({ namespace: cluster.namespace, name: deployment })), 'the rollback rolled out', { timeoutMs: 60_000, intervalMs: 50 });
      const undone = await apps.readNamespacedDeployment({ namespace: cluster.namespace, name: deployment });
      const replicaSets = (await consumers.replicaSets()).map((replicaSet) => replicaSet.metadata?.name).sort();

      // The next `keyroll run`, as execute-run does it: the run, then the restarts owed from
      // earlier runs. Its timeouts make an owed entry due 6 s after its store (sync + rollout);
      // the run starts after that, so whatever the undo brought back is due.
      const refresher = bench.refresher({ syncTimeoutMs: 1_000, rolloutTimeoutMs: 5_000 });
      await waitFor(() => Date.now() > lastStore + 7_000, 'the owed entries due', { timeoutMs: 30_000, intervalMs: 100 });
      const { summary } = await bench.run([keyId], SCHEDULED, refresher);
      await refresher.pickUpOwed(bench.bench.policy.keys, bench.bench.audit, bench.records);

      expect(summary.rotated).toBe(0);
      const after = await apps.readNamespacedDeployment({ namespace: cluster.namespace, name: deployment });
      expect(after.spec?.template.metadata?.annotations?.[RESTARTED_AT]).toBe(undone.spec?.template.metadata?.annotations?.[RESTARTED_AT]);
      // The pod template is untouched: no restart. (The generation may move: settling the entry the
      // undo brought back removes it from the Deployment's annotations, and a Deployment's
      // generation counts annotation changes too.)
      expect(after.spec?.template).toEqual(undone.spec?.template);
      expect((await consumers.replicaSets()).map((replicaSet) => replicaSet.metadata?.name).sort()).toEqual(replicaSets);
    }, 180_000);
  });
}
