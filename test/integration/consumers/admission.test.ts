// What keyroll's service account may change in its consumers, on a real API server (issue 27,
// finding 8): the chart's Role grants `patch` on whole workloads and ExternalSecrets, so the token
// alone could rewrite a pod template; the chart's ValidatingAdmissionPolicy
// (helm/keyroll/templates/consumer-admission-policy.yaml, applied by consumerNamespace as rendered)
// lets that account change only the restart annotation, keyroll.io/* annotations and an
// ExternalSecret's force-sync. Every patch here is sent with keyroll's own token (RBAC from the
// chart), except where a test says it impersonates.
import {
  ApiException,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { externalSecretRef } from '../../../src/consumers/kinds/external-secret-api.ts';
import { FORCE_SYNC } from '../../../src/consumers/kinds/external-secret.ts';
import { recordOwed, restartWorkload } from '../../../src/consumers/kinds/workload.ts';
import { workloadRef } from '../../../src/consumers/kinds/workloads.ts';
import { RESTART_OWED, RESTARTED_AT, RESTARTED_FOR } from '../../../src/consumers/markers.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { kubeApiServer } from '../servers.ts';
import {
  ADMISSION_POLICY_TEMPLATE,
  refusedByPolicy,
  requestAs,
  serviceAccountUser,
} from '../../support/consumer-admission-policy.ts';
import {
  consumerNamespace,
  renderConsumerTemplates,
  type ConsumerNamespace,
} from '../../support/consumer-cluster.ts';

const server = await kubeApiServer();

const ES = { group: 'external-secrets.io', version: 'v1', plural: 'externalsecrets' } as const;
const PLURALS = ['deployments', 'statefulsets', 'daemonsets'] as const;
type Plural = (typeof PLURALS)[number];
const KIND_OF: Record<Plural, 'deployment' | 'statefulSet' | 'daemonSet'> = {
  deployments: 'deployment',
  statefulsets: 'statefulSet',
  daemonsets: 'daemonSet',
};

/** A patch as `config` (keyroll's token, or the admin): 'allowed', or the status and message of the refusal. */
async function patchAs(
  config: KubeConfig,
  target: { group: string; version: string; plural: string; namespace: string; name: string },
  body: object,
  strategy: PatchStrategy = PatchStrategy.MergePatch,
): Promise<'allowed' | { status: number; message: string }> {
  try {
    await config
      .makeApiClient(CustomObjectsApi)
      .patchNamespacedCustomObject({ ...target, body }, setHeaderOptions('Content-Type', strategy));
    return 'allowed';
  } catch (error) {
    if (!(error instanceof ApiException)) throw error;
    const body =
      typeof error.body === 'string'
        ? (JSON.parse(error.body) as { message?: string })
        : (error.body as { message?: string });
    return { status: error.code, message: body.message ?? '' };
  }
}

const refused = (answer: Awaited<ReturnType<typeof patchAs>>): boolean =>
  answer !== 'allowed' && refusedByPolicy({ status: answer.status, body: { message: answer.message } });

if (server === undefined) {
  describe.skip("the chart's admission policy on a real Kubernetes API server (not available; see the global setup message)", () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;
  const temp = useTempDir('keyroll-admission-');

  async function cluster(): Promise<
    ConsumerNamespace & { workload: (plural: Plural) => ReturnType<typeof workloadRef> }
  > {
    const made = await consumerNamespace(kube, temp.path(), (namespace) => [
      {
        namespace,
        externalSecrets: ['billing-api-key'],
        deployments: ['billing'],
        statefulSets: ['ledger'],
        daemonSets: ['agent'],
      },
    ]);
    await made.createExternalSecret('billing-api-key');
    await made.createDeployment('billing');
    await made.createStatefulSet('ledger');
    await made.createDaemonSet('agent');
    const names: Record<Plural, string> = {
      deployments: 'billing',
      statefulsets: 'ledger',
      daemonsets: 'agent',
    };
    return Object.assign(made, {
      workload: (plural: Plural) => workloadRef(KIND_OF[plural], made.namespace, names[plural]),
    });
  }

  describe("keyroll's service account under the chart's ValidatingAdmissionPolicy", () => {
    it('is refused a patch of the container image, of each workload kind, and the workload stays as it was', async () => {
      const c = await cluster();
      for (const plural of PLURALS) {
        const ref = c.workload(plural);
        const answer = await patchAs(
          c.keyroll,
          ref,
          {
            spec: { template: { spec: { containers: [{ name: 'app', image: 'registry.invalid/evil:1' }] } } },
          },
          PatchStrategy.StrategicMergePatch,
        );
        expect(refused(answer), `${plural}: ${JSON.stringify(answer)}`).toBe(true);
        expect(answer).toMatchObject({
          status: 403,
          message: expect.stringContaining('kubectl.kubernetes.io/restartedAt') as unknown,
        });
        const stored = (await c.readWorkload(plural, ref.name)) as {
          spec?: { template?: { spec?: { containers?: { image?: string }[] } } };
        };
        expect(stored.spec?.template?.spec?.containers?.[0]?.image).toBe('registry.invalid/app:1');
      }
    });

    it("accepts the restart and keyroll's own annotations, as keyroll's code writes them", async () => {
      const c = await cluster();
      for (const plural of PLURALS) {
        const ref = c.workload(plural);
        await recordOwed(c.client, ref, [
          {
            rotationId: `rot-${plural}`,
            keyId: 'key_demo_billing',
            urgent: true,
            storedAt: new Date().toISOString(),
          },
        ]);
        const restarted = await restartWorkload(c.client, ref, [`rot-${plural}`], { now: () => Date.now() });
        expect(restarted.restarted, plural).toBe(true);
        const stored = await c.readWorkload(plural, ref.name);
        expect(stored.spec?.template?.metadata?.annotations?.[RESTARTED_AT]).toMatch(
          /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/,
        );
        expect(stored.metadata?.annotations?.[RESTARTED_FOR]).toBe(`rot-${plural}`);
      }
      // What `kubectl rollout restart` sends, by keyroll's token.
      expect(
        await patchAs(
          c.keyroll,
          c.workload('deployments'),
          { spec: { template: { metadata: { annotations: { [RESTARTED_AT]: '2030-01-01T00:00:00Z' } } } } },
          PatchStrategy.StrategicMergePatch,
        ),
      ).toBe('allowed');
      // keyroll's annotations may also go.
      expect(
        await patchAs(c.keyroll, c.workload('deployments'), {
          metadata: { annotations: { [RESTART_OWED]: null, [RESTARTED_FOR]: null } },
        }),
      ).toBe('allowed');
    });

    it('accepts force-sync on an ExternalSecret and refuses a change of its spec', async () => {
      const c = await cluster();
      const ref = externalSecretRef('v1', c.namespace, 'billing-api-key');
      await c.client.patch(ref, { metadata: { annotations: { [FORCE_SYNC]: '1767225600' } } }, 'merge');
      expect((await c.readExternalSecret('billing-api-key')).metadata?.annotations?.[FORCE_SYNC]).toBe(
        '1767225600',
      );
      expect(
        await patchAs(
          c.keyroll,
          { ...ES, namespace: c.namespace, name: 'billing-api-key' },
          { metadata: { annotations: { 'keyroll.io/note': 'x' } } },
        ),
      ).toBe('allowed');
      // Where the value goes, and where it comes from, are the ExternalSecret's owner's to change.
      expect(
        refused(
          await patchAs(
            c.keyroll,
            { ...ES, namespace: c.namespace, name: 'billing-api-key' },
            { spec: { target: { name: 'somewhere-else' } } },
          ),
        ),
      ).toBe(true);
      expect(
        refused(
          await patchAs(
            c.keyroll,
            { ...ES, namespace: c.namespace, name: 'billing-api-key' },
            {
              spec: { data: [{ secretKey: 'apiKey', remoteRef: { key: 'apps/other', property: 'apiKey' } }] },
            },
          ),
        ),
      ).toBe(true);
    });

    it('refuses everything else: labels, other annotations, replicas, a restart smuggling a change, force-sync on a workload, finalizers', async () => {
      const c = await cluster();
      const ref = c.workload('deployments');
      const attempts: Record<string, [object, PatchStrategy?]> = {
        'a pod template label': [{ spec: { template: { metadata: { labels: { extra: 'x' } } } } }],
        'another pod template annotation': [
          { spec: { template: { metadata: { annotations: { 'example.com/sidecar': 'inject' } } } } },
        ],
        replicas: [{ spec: { replicas: 7 } }],
        'a label on the workload': [{ metadata: { labels: { team: 'other' } } }],
        'another annotation on the workload': [
          { metadata: { annotations: { 'example.com/owner': 'keyroll' } } },
        ],
        'force-sync on a workload': [{ metadata: { annotations: { [FORCE_SYNC]: '1' } } }],
        'a finalizer': [{ metadata: { finalizers: ['example.com/hold'] } }],
        'a restart with an image change': [
          {
            spec: {
              template: {
                metadata: { annotations: { [RESTARTED_AT]: '2031-01-01T00:00:00Z' } },
                spec: { containers: [{ name: 'app', image: 'registry.invalid/evil:1' }] },
              },
            },
          },
          PatchStrategy.StrategicMergePatch,
        ],
        'a restart with a service account change': [
          {
            spec: {
              template: {
                metadata: { annotations: { [RESTARTED_AT]: '2031-01-01T00:00:00Z' } },
                spec: { serviceAccountName: 'cluster-admin' },
              },
            },
          },
          PatchStrategy.StrategicMergePatch,
        ],
      };
      for (const [what, [body, strategy]] of Object.entries(attempts)) {
        const answer = await patchAs(c.keyroll, ref, body, strategy);
        expect(refused(answer), `${what}: ${JSON.stringify(answer)}`).toBe(true);
      }
      // The API server bumps a DaemonSet's template generation on a restart; keyroll cannot set it
      // alone (the API server keeps its own value, or the policy refuses the change).
      await patchAs(c.keyroll, c.workload('daemonsets'), {
        metadata: { annotations: { 'deprecated.daemonset.template.generation': '99' } },
      });
      expect(
        (await c.readWorkload('daemonsets', 'agent')).metadata?.annotations?.[
          'deprecated.daemonset.template.generation'
        ],
      ).not.toBe('99');
      // And the admin (anyone but keyroll's service account) is not limited by it.
      expect(
        await patchAs(
          c.admin,
          ref,
          {
            spec: { template: { spec: { containers: [{ name: 'app', image: 'registry.invalid/app:2' }] } } },
          },
          PatchStrategy.StrategicMergePatch,
        ),
      ).toBe('allowed');
    });

    it("refuses keyroll's user a create or a delete even where RBAC would allow it (impersonated with system:masters)", async () => {
      const c = await cluster();
      const who = { user: serviceAccountUser(c.releaseNamespace, 'keyroll'), groups: ['system:masters'] };
      const deleted = await requestAs(
        kube,
        who,
        'DELETE',
        `/apis/apps/v1/namespaces/${c.namespace}/deployments/billing?dryRun=All`,
      );
      expect(refusedByPolicy(deleted), JSON.stringify(deleted.body)).toBe(true);
      const image = await requestAs(
        kube,
        who,
        'PATCH',
        `/apis/apps/v1/namespaces/${c.namespace}/deployments/billing?dryRun=All`,
        { spec: { template: { spec: { containers: [{ name: 'app', image: 'registry.invalid/evil:1' }] } } } },
        'application/strategic-merge-patch+json',
      );
      expect(refusedByPolicy(image), JSON.stringify(image.body)).toBe(true);
    });
  });

  describe('where the chart renders the policy', () => {
    const access = [{ namespace: 'shop', deployments: ['billing'] }];
    /** The kinds the template renders; helm answers "could not find template" when it renders nothing. */
    const kinds = async (
      set: string[] = [],
      withAccess = access,
      apiVersions?: string[],
    ): Promise<(string | undefined)[]> => {
      try {
        return (
          await renderConsumerTemplates('keyroll', withAccess, [ADMISSION_POLICY_TEMPLATE], {
            set,
            ...(apiVersions ? { apiVersions } : {}),
          })
        ).map((object) => object.kind);
      } catch (error) {
        if (error instanceof Error && error.message.includes('could not find template')) return [];
        throw error;
      }
    };

    it("with consumerAccess, by default: the policy and its binding, for keyroll's service account only", async () => {
      expect(await kinds()).toEqual(['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding']);
      const [policy] = await renderConsumerTemplates('keyroll', access, [ADMISSION_POLICY_TEMPLATE]);
      expect(JSON.stringify(policy)).toContain(
        'request.userInfo.username == \\"system:serviceaccount:keyroll:keyroll\\"',
      );
    });

    it('not with consumerAdmissionPolicy.enabled=false, nor without consumerAccess, nor where the API server does not serve the kind (before 1.30)', async () => {
      expect(await kinds(['consumerAdmissionPolicy.enabled=false'])).toEqual([]);
      expect(await kinds([], [])).toEqual([]);
      expect(await kinds([], access, [])).toEqual([]);
    });
  });
}
