// `kubectl rollout undo deployment/NAME` through the API, as kubectl v1.31 does it
// (DeploymentRollbacker.Rollback in k8s.io/kubectl pkg/polymorphichelpers/rollback.go), for the
// tests against the real deployment controller (test/support/kube-controllers.ts): there is no
// kubectl binary here, and the patch is small enough to replay exactly.
import { PatchStrategy, setHeaderOptions, type AppsV1Api, type V1Deployment } from '@kubernetes/client-node';

export const REVISION = 'deployment.kubernetes.io/revision';
/** kubectl's annotationsToSkip: kept from the Deployment, never copied from the ReplicaSet. */
export const KEPT_BY_UNDO = [
  'kubectl.kubernetes.io/last-applied-configuration',
  REVISION,
  'deployment.kubernetes.io/revision-history',
  'deployment.kubernetes.io/desired-replicas',
  'deployment.kubernetes.io/max-replicas',
  'deprecated.deployment.rollback.to',
];

/**
 * The ReplicaSet of the previous revision gives back its pod template (without pod-template-hash)
 * and its annotations (keyroll's markers among them), in one JSON patch of the Deployment.
 */
export async function rolloutUndo(apps: AppsV1Api, namespace: string, name: string): Promise<void> {
  const deployment = await apps.readNamespacedDeployment({ namespace, name });
  const { items } = await apps.listNamespacedReplicaSet({ namespace });
  const revisions = items
    .filter(
      (replicaSet) =>
        replicaSet.metadata?.ownerReferences?.some((owner) => owner.uid === deployment.metadata?.uid) ===
        true,
    )
    .map((replicaSet) => ({
      replicaSet,
      revision: Number(replicaSet.metadata?.annotations?.[REVISION] ?? '0'),
    }))
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
  for (const [key, value] of Object.entries(previous.metadata?.annotations ?? {}))
    if (!KEPT_BY_UNDO.includes(key)) annotations[key] = value;
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

/** Whether the Deployment's rollout is complete with `replicas` pods, as `kubectl rollout status` reads it. */
export function rolledOut(deployment: V1Deployment, replicas: number): boolean {
  const { status, metadata } = deployment;
  return (
    (status?.observedGeneration ?? 0) >= (metadata?.generation ?? 1) &&
    status?.updatedReplicas === replicas &&
    status.availableReplicas === replicas &&
    status.replicas === replicas
  );
}
