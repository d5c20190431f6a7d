// STAND-IN for what the deployment controller and `kubectl rollout undo` do with a Deployment's
// annotations (issue 28 item 4), written from their source so that a test using it can later run
// against the real kube-controller-manager (then only `syncReplicaSets` goes: `rolloutUndo` is
// kubectl's own client-side step and stays):
// - the deployment controller, on every sync of a Deployment (k8s.io/kubernetes
//   pkg/controller/deployment/sync.go getNewReplicaSet → pkg/controller/deployment/util
//   SetNewReplicaSetAnnotations → copyDeploymentAnnotationsToReplicaSet), copies every annotation
//   of the Deployment but annotationsToSkip (last-applied-configuration, revision, revision-history,
//   desired-replicas, max-replicas, rollbackTo) onto its new ReplicaSet, the one whose pod template
//   is the Deployment's (made with revision max+1 when there is none); a copy adds and overwrites,
//   never removes, and an old ReplicaSet keeps what it got last;
// - `kubectl rollout undo` (k8s.io/kubectl pkg/polymorphichelpers/rollback.go
//   DeploymentRollbacker.Rollback, getDeploymentPatch) sends one JSON patch: replace /spec/template
//   with the previous revision's ReplicaSet template (without its pod-template-hash label) and
//   /metadata/annotations with that ReplicaSet's annotations but annotationsToSkip, which keep the
//   Deployment's own values.
// ReplicaSets are real objects of the API server (made by the admin; no controller runs pods).
import { createHash } from 'node:crypto';
import {
  AppsV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1Deployment,
  type V1PodTemplateSpec,
  type V1ReplicaSet,
} from '@kubernetes/client-node';
import type { KubeClient } from '../../../src/consumers/kubernetes/client.ts';
import type { ConsumerNamespace } from '../../support/consumer-cluster.ts';

const REVISION = 'deployment.kubernetes.io/revision';
const HASH_LABEL = 'pod-template-hash';
/** pkg/controller/deployment/util annotationsToSkip (and kubectl's rollback.go copy of it). */
const ANNOTATIONS_TO_SKIP = new Set([
  'kubectl.kubernetes.io/last-applied-configuration',
  REVISION,
  'deployment.kubernetes.io/revision-history',
  'deployment.kubernetes.io/desired-replicas',
  'deployment.kubernetes.io/max-replicas',
  'deprecated.deployment.rollback.to',
]);

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    return `{${entries
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

function withoutHash(template: V1PodTemplateSpec | undefined): V1PodTemplateSpec {
  const copy = JSON.parse(JSON.stringify(template ?? {})) as V1PodTemplateSpec;
  if (copy.metadata?.labels)
    copy.metadata.labels = Object.fromEntries(
      Object.entries(copy.metadata.labels).filter(([key]) => key !== HASH_LABEL),
    );
  return copy;
}

function withLabels(template: V1PodTemplateSpec, labels: Record<string, string>): V1PodTemplateSpec {
  const copy = JSON.parse(JSON.stringify(template)) as V1PodTemplateSpec;
  copy.metadata = copy.metadata ?? {};
  copy.metadata.labels = labels;
  return copy;
}

function revisionOf(rs: V1ReplicaSet): number {
  return Number(rs.metadata?.annotations?.[REVISION] ?? '0');
}

export class DeploymentHistory {
  readonly #apps: AppsV1Api;
  readonly #namespace: string;

  constructor(cluster: Pick<ConsumerNamespace, 'admin' | 'namespace'>) {
    this.#apps = cluster.admin.makeApiClient(AppsV1Api);
    this.#namespace = cluster.namespace;
  }

  async replicaSets(name: string): Promise<V1ReplicaSet[]> {
    const list = await this.#apps.listNamespacedReplicaSet({
      namespace: this.#namespace,
      labelSelector: `app=${name}`,
    });
    return list.items.sort((a, b) => revisionOf(a) - revisionOf(b));
  }

  /** The deployment controller's sync of the Deployment's new ReplicaSet (copyDeploymentAnnotationsToReplicaSet). */
  async syncReplicaSets(name: string): Promise<void> {
    const deployment = await this.#apps.readNamespacedDeployment({ namespace: this.#namespace, name });
    const template = withoutHash(deployment.spec?.template);
    const sets = await this.replicaSets(name);
    const current = sets.find((rs) => canonical(withoutHash(rs.spec?.template)) === canonical(template));
    const copied = (into: Record<string, string>): Record<string, string> => {
      for (const [key, value] of Object.entries(deployment.metadata?.annotations ?? {}))
        if (!ANNOTATIONS_TO_SKIP.has(key)) into[key] = value;
      return into;
    };
    if (current === undefined) {
      const hash = createHash('sha256').update(canonical(template)).digest('hex').slice(0, 10);
      const revision = Math.max(0, ...sets.map(revisionOf)) + 1;
      const labels = { ...template.metadata?.labels, [HASH_LABEL]: hash };
      await this.#apps.createNamespacedReplicaSet({
        namespace: this.#namespace,
        body: {
          metadata: {
            name: `${name}-${hash}`,
            labels,
            annotations: copied({ [REVISION]: String(revision) }),
          },
          spec: { replicas: 0, selector: { matchLabels: labels }, template: withLabels(template, labels) },
        },
      });
      await this.#setDeploymentRevision(deployment, revision);
      return;
    }
    // An old ReplicaSet that is new again (an undo) takes the next revision.
    const others = sets.filter((rs) => rs !== current).map(revisionOf);
    const revision = others.some((other) => other > revisionOf(current))
      ? Math.max(...others) + 1
      : revisionOf(current);
    const metadata = current.metadata ?? {};
    metadata.annotations = copied({ ...metadata.annotations, [REVISION]: String(revision) });
    current.metadata = metadata;
    await this.#apps.replaceNamespacedReplicaSet({
      namespace: this.#namespace,
      name: metadata.name ?? '',
      body: current,
    });
    await this.#setDeploymentRevision(deployment, revision);
  }

  /** `kubectl rollout undo deployment/<name>` (to the previous revision): DeploymentRollbacker.Rollback's patch. */
  async rolloutUndo(name: string): Promise<void> {
    const deployment = await this.#apps.readNamespacedDeployment({ namespace: this.#namespace, name });
    const sets = await this.replicaSets(name);
    const previous = sets.at(-2);
    if (previous === undefined) throw new Error(`no rollout history found for deployment ${name}`);
    const annotations: Record<string, string> = {};
    for (const key of ANNOTATIONS_TO_SKIP) {
      const value = deployment.metadata?.annotations?.[key];
      if (value !== undefined) annotations[key] = value;
    }
    for (const [key, value] of Object.entries(previous.metadata?.annotations ?? {}))
      if (!ANNOTATIONS_TO_SKIP.has(key)) annotations[key] = value;
    const body = [
      { op: 'replace', path: '/spec/template', value: withoutHash(previous.spec?.template) },
      { op: 'replace', path: '/metadata/annotations', value: annotations },
    ];
    await this.#apps.patchNamespacedDeployment(
      { namespace: this.#namespace, name, body },
      setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
    );
    await this.syncReplicaSets(name);
  }

  /**
   * keyroll's client, with the controller's sync after each change keyroll makes to a Deployment:
   * the controller sees every state (the worst case: an owed entry reaches the old ReplicaSet).
   */
  observing(client: KubeClient): KubeClient {
    return {
      get: (ref, signal) => client.get(ref, signal),
      watch: (ref, version, onChange, signal) => client.watch(ref, version, onChange, signal),
      servedVersions: (group, signal) => client.servedVersions(group, signal),
      mayI: (verb, ref, signal) => client.mayI(verb, ref, signal),
      patch: async (ref, patch, type, signal) => {
        const patched = await client.patch(ref, patch, type, signal);
        if (ref.plural === 'deployments') await this.syncReplicaSets(ref.name);
        return patched;
      },
    };
  }

  async #setDeploymentRevision(deployment: V1Deployment, revision: number): Promise<void> {
    if (deployment.metadata?.annotations?.[REVISION] === String(revision)) return;
    await this.#apps.patchNamespacedDeployment(
      {
        namespace: this.#namespace,
        name: deployment.metadata?.name ?? '',
        body: { metadata: { annotations: { [REVISION]: String(revision) } } },
      },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
  }
}
