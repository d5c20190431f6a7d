// The proof of a dead lock holder (src/leader/holder-liveness.ts) on the real kube-apiserver, as
// keyroll's service account under the Role the chart renders (templates/leader-rbac.yaml): it may
// read a pod of its namespace and nothing more, and reads the API server's own answers: a pod
// running since before the holder proves nothing, a restarted container, a deleted pod (the API
// server's NotFound) and a pod of the same name with another UID prove the holder dead.
import { randomBytes } from 'node:crypto';
import {
  ApiException,
  CoreV1Api,
  RbacAuthorizationV1Api,
  type V1Lease,
  type V1Role,
  type V1RoleBinding,
} from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { HolderLiveness, kubePodReader } from '../../src/leader/holder-liveness.ts';
import { lockOwnerOf } from '../../src/rotation/lock-owner.ts';
import { adminKubeConfig, refusalStatus, serviceAccountCredentials } from '../support/kube-apiserver.ts';
import { setKeyrollContainer, startKeyrollPod, stopKeyrollContainer } from '../support/kube-pods.ts';
import { renderConsumerTemplates } from '../support/consumer-cluster.ts';
import { waitFor } from '../support/wait-for.ts';
import { kubeApiServer } from './servers.ts';

const server = await kubeApiServer();
const SKEW = 1_000;

if (server === undefined) {
  describe.skip('proving a lock holder dead (no Kubernetes API server; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;
  const admin = adminKubeConfig(kube);
  const core = admin.makeApiClient(CoreV1Api);

  async function untilGone(namespace: string, name: string): Promise<void> {
    const gone = async (): Promise<boolean> => {
      try {
        await core.readNamespacedPod({ namespace, name });
        return false;
      } catch (error) {
        if (error instanceof ApiException && error.code === 404) return true;
        throw error;
      }
    };
    await waitFor(gone, `pod ${name} gone`, { timeoutMs: 10_000, intervalMs: 100 });
  }

  describe("proving a lock holder dead, as keyroll's service account under the chart's Role", () => {
    it('reads the pod a lock owner names: alive proves nothing; a restart, a deletion, a new UID prove death', async () => {
      const namespace = `keyroll-holder-${randomBytes(4).toString('hex')}`;
      await core.createNamespace({ body: { metadata: { name: namespace } } });
      const rendered = (await renderConsumerTemplates(namespace, [], ['templates/leader-rbac.yaml'], {
        set: ['daemon.enabled=true', 'cronjob.enabled=false'],
      })) as (V1Lease | V1Role | V1RoleBinding)[];
      const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
      for (const object of rendered) {
        if (object.kind === 'Role') await rbac.createNamespacedRole({ namespace, body: object });
        if (object.kind === 'RoleBinding')
          await rbac.createNamespacedRoleBinding({ namespace, body: object as V1RoleBinding });
      }
      const { kubeConfig } = await serviceAccountCredentials(kube, namespace, 'keyroll');

      const holderStart = Date.now();
      const uid = await startKeyrollPod(core, namespace, 'keyroll-a', new Date(holderStart - 2_000));
      const owner = lockOwnerOf(
        { POD_NAMESPACE: namespace, POD_NAME: 'keyroll-a', POD_UID: uid },
        holderStart,
      );
      // A fresh prover for each question: a proven death is remembered.
      const prove = () => new HolderLiveness({ readPod: kubePodReader(kubeConfig) }).proveDead(owner, SKEW);

      expect(await prove()).toBeUndefined();

      // Killed: the kubelet reports the container stopped, its restart pending.
      await stopKeyrollContainer(core, namespace, 'keyroll-a', new Date(holderStart + SKEW + 2_000));
      expect(await prove()).toMatchObject({ kind: 'container-stopped', pod: `${namespace}/keyroll-a` });
      // Restarted in the same pod: running again, since after the holder started.
      await setKeyrollContainer(
        core,
        namespace,
        'keyroll-a',
        { running: { startedAt: new Date(holderStart + SKEW + 3_000) } },
        { restartCount: 1 },
      );
      expect(await prove()).toMatchObject({ kind: 'container-restarted', pod: `${namespace}/keyroll-a` });

      await core.deleteNamespacedPod({ namespace, name: 'keyroll-a' });
      await untilGone(namespace, 'keyroll-a');
      expect(await prove()).toEqual({ kind: 'pod-gone', pod: `${namespace}/keyroll-a` });

      const again = await startKeyrollPod(core, namespace, 'keyroll-a', new Date(holderStart - 2_000));
      expect(await prove()).toEqual({ kind: 'pod-replaced', pod: `${namespace}/keyroll-a`, uid: again });

      // Read only, in its own namespace: no list, no delete, no pod of another namespace (403: nothing proven).
      const asKeyroll = kubeConfig.makeApiClient(CoreV1Api);
      expect(await refusalStatus(() => asKeyroll.listNamespacedPod({ namespace }))).toBe(403);
      expect(await refusalStatus(() => asKeyroll.deleteNamespacedPod({ namespace, name: 'keyroll-a' }))).toBe(
        403,
      );
      const elsewhere = lockOwnerOf(
        { POD_NAMESPACE: 'default', POD_NAME: 'keyroll-gone', POD_UID: uid },
        holderStart,
      );
      expect(
        await new HolderLiveness({ readPod: kubePodReader(kubeConfig) }).proveDead(elsewhere, SKEW),
      ).toBeUndefined();
    });
  });
}
