// The Kubernetes API server the consumer tests run against (test/support/kube-apiserver.ts,
// provided by global-setup.ts) is a real one with RBAC on: a service account holding a Role that
// names one object may get and patch that object and is refused (403) everything else, and
// external-secrets' real ExternalSecret CRD accepts the `force-sync` annotation patch that
// `kubectl annotate es NAME force-sync=… --overwrite` sends.
import { readFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  VersionApi,
  setHeaderOptions,
  type KubeConfig,
  type V1CustomResourceDefinition,
  type V1PolicyRule,
} from '@kubernetes/client-node';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import {
  adminKubeConfig,
  installCustomResourceDefinition,
  serviceAccountCredentials,
  type KubeApiServerInfo,
} from '../support/kube-apiserver.ts';
import { kubeApiServer } from './servers.ts';

const EXTERNAL_SECRETS_CRD = new URL(
  '../fixtures/kubernetes/externalsecrets-crd-v2.9.0.yaml',
  import.meta.url,
);
const server = await kubeApiServer();

function uniqueNamespace(): string {
  return `keyroll-test-${randomBytes(4).toString('hex')}`;
}

/** The HTTP status of a refused call, or 'allowed'. */
async function statusOf(call: () => Promise<unknown>): Promise<number | 'allowed'> {
  try {
    await call();
    return 'allowed';
  } catch (error) {
    if (error instanceof ApiException) return error.code;
    throw error;
  }
}

/** Creates the namespace, a Role with `rules` and a binding of it to service account `keyroll`; returns that account's config. */
async function keyrollBoundTo(
  kube: KubeApiServerInfo,
  namespace: string,
  rules: V1PolicyRule[],
): Promise<KubeConfig> {
  const { kubeConfig } = await serviceAccountCredentials(kube, namespace, 'keyroll');
  const rbac = adminKubeConfig(kube).makeApiClient(RbacAuthorizationV1Api);
  await rbac.createNamespacedRole({ namespace, body: { metadata: { name: 'keyroll-consumers' }, rules } });
  await rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name: 'keyroll-consumers' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'keyroll-consumers' },
      subjects: [{ kind: 'ServiceAccount', name: 'keyroll', namespace }],
    },
  });
  return kubeConfig;
}

async function createDeployment(kube: KubeApiServerInfo, namespace: string, name: string): Promise<void> {
  const labels = { app: name };
  await adminKubeConfig(kube)
    .makeApiClient(AppsV1Api)
    .createNamespacedDeployment({
      namespace,
      body: {
        metadata: { name },
        spec: {
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: { containers: [{ name: 'app', image: 'registry.invalid/app:1' }] },
          },
        },
      },
    });
}

if (server === undefined) {
  describe.skip('the test Kubernetes API server (not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;

  describe('the test Kubernetes API server', () => {
    it('answers /version, and refuses (403) a service account that no Role names', async () => {
      const version = await adminKubeConfig(kube).makeApiClient(VersionApi).getCode();
      expect(version.gitVersion).toMatch(/^v1\.\d+\.\d+$/);

      const { kubeConfig } = await serviceAccountCredentials(kube, uniqueNamespace(), 'keyroll');
      expect(await statusOf(() => kubeConfig.makeApiClient(CoreV1Api).listNamespace())).toBe(403);
    });

    it('issues service-account tokens from its own issuer (TokenRequest API)', async () => {
      const { token } = await serviceAccountCredentials(kube, uniqueNamespace(), 'keyroll');
      const payload: unknown = JSON.parse(
        Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8'),
      );
      expect(payload).toMatchObject({ iss: kube.serviceAccountIssuer });
    });

    it('lets a Role with resourceNames get and patch the one Deployment it names, and answers 403 for another', async () => {
      const namespace = uniqueNamespace();
      const asKeyroll = await keyrollBoundTo(kube, namespace, [
        {
          apiGroups: ['apps'],
          resources: ['deployments'],
          resourceNames: ['billing'],
          verbs: ['get', 'patch'],
        },
      ]);
      await createDeployment(kube, namespace, 'billing');
      await createDeployment(kube, namespace, 'payments');
      const apps = asKeyroll.makeApiClient(AppsV1Api);
      // What `kubectl rollout restart` sends: a strategic merge patch of the pod template's annotation.
      const restartedAt = new Date().toISOString();
      const restart = {
        spec: {
          template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': restartedAt } } },
        },
      };
      const strategic = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

      const patched = await apps.patchNamespacedDeployment(
        { namespace, name: 'billing', body: restart },
        strategic,
      );
      expect(patched.spec?.template.metadata?.annotations).toEqual({
        'kubectl.kubernetes.io/restartedAt': restartedAt,
      });
      expect((await apps.readNamespacedDeployment({ namespace, name: 'billing' })).metadata?.generation).toBe(
        2,
      );

      expect(await statusOf(() => apps.readNamespacedDeployment({ namespace, name: 'payments' }))).toBe(403);
      expect(
        await statusOf(() =>
          apps.patchNamespacedDeployment({ namespace, name: 'payments', body: restart }, strategic),
        ),
      ).toBe(403);
      // resourceNames cannot narrow a list, so the Role grants none.
      expect(await statusOf(() => apps.listNamespacedDeployment({ namespace }))).toBe(403);
    });

    it("serves external-secrets' ExternalSecret CRD, and a Role-bound force-sync annotation patch lands on one", async () => {
      const definition = parse(await readFile(EXTERNAL_SECRETS_CRD, 'utf8')) as V1CustomResourceDefinition;
      await installCustomResourceDefinition(kube, definition);
      const namespace = uniqueNamespace();
      const asKeyroll = await keyrollBoundTo(kube, namespace, [
        {
          apiGroups: ['external-secrets.io'],
          resources: ['externalsecrets'],
          resourceNames: ['billing-api-key'],
          verbs: ['get', 'patch'],
        },
      ]);
      const externalSecret = {
        group: 'external-secrets.io',
        version: 'v1',
        namespace,
        plural: 'externalsecrets',
      };
      await adminKubeConfig(kube)
        .makeApiClient(CustomObjectsApi)
        .createNamespacedCustomObject({
          ...externalSecret,
          body: {
            apiVersion: 'external-secrets.io/v1',
            kind: 'ExternalSecret',
            metadata: { name: 'billing-api-key' },
            spec: {
              refreshInterval: '1h',
              secretStoreRef: { kind: 'ClusterSecretStore', name: 'vault' },
              target: { name: 'billing-api-key' },
              data: [{ secretKey: 'apiKey', remoteRef: { key: 'apps/billing/api-key', property: 'apiKey' } }],
            },
          },
        });
      const objects = asKeyroll.makeApiClient(CustomObjectsApi);
      // What `kubectl annotate es billing-api-key force-sync=$(date +%s) --overwrite` sends.
      const forceSync = String(Math.floor(Date.now() / 1000));
      const body = { metadata: { annotations: { 'force-sync': forceSync } } };

      await objects.patchNamespacedCustomObject(
        { ...externalSecret, name: 'billing-api-key', body },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      const read: unknown = await objects.getNamespacedCustomObject({
        ...externalSecret,
        name: 'billing-api-key',
      });
      expect(read).toMatchObject({
        metadata: { annotations: { 'force-sync': forceSync } },
        spec: { refreshInterval: '1h' },
      });

      expect(
        await statusOf(() => objects.getNamespacedCustomObject({ ...externalSecret, name: 'other-api-key' })),
      ).toBe(403);
    });
  });
}
