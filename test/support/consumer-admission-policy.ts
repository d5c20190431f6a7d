// The chart's ValidatingAdmissionPolicy for keyroll's service account
// (helm/keyroll/templates/consumer-admission-policy.yaml) on the test API server: applied as the
// chart renders it, and waited for until the API server enforces it. The admission plugin picks a
// new policy up from its informers a moment after it is created; until then every request passes,
// so a test that relied on it without waiting would prove nothing.
import {
  AdmissionregistrationV1Api,
  type V1ValidatingAdmissionPolicy,
  type V1ValidatingAdmissionPolicyBinding,
} from '@kubernetes/client-node';
import { Agent, request } from 'undici';
import { adminKubeConfig, type KubeApiServerInfo } from './kube-apiserver.ts';

export const ADMISSION_POLICY_TEMPLATE = 'templates/consumer-admission-policy.yaml';

/** How long the API server may take to enforce a new policy before the setup fails. */
const ENFORCED_WITHIN_MS = 30_000;

export interface Answer {
  status: number;
  /** The Status object of a refusal, or the object. */
  body: { message?: string; reason?: string } & Record<string, unknown>;
}

/**
 * One request as `user` in `groups`, through the admin's impersonation (Impersonate-User and
 * Impersonate-Group): with group system:masters, RBAC allows everything, so what refuses the
 * request can only be admission.
 */
export async function requestAs(
  kube: KubeApiServerInfo,
  who: { user: string; groups: readonly string[] },
  method: 'POST' | 'PATCH' | 'DELETE',
  path: string,
  body?: object,
  contentType = 'application/json',
): Promise<Answer> {
  const agent = new Agent({ connect: { ca: kube.caPem, cert: kube.admin.certPem, key: kube.admin.keyPem } });
  try {
    const response = await request(`${kube.server}${path}`, {
      method,
      dispatcher: agent,
      headers: {
        'content-type': contentType,
        'impersonate-user': who.user,
        'impersonate-group': [...who.groups],
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.statusCode, body: (await response.body.json()) as Answer['body'] };
  } finally {
    await agent.close();
  }
}

/** The username of a service account, as the API server sees its token. */
export function serviceAccountUser(namespace: string, name: string): string {
  return `system:serviceaccount:${namespace}:${name}`;
}

/** Whether a refusal came from the chart's ValidatingAdmissionPolicy. */
export function refusedByPolicy(answer: Pick<Answer, 'status' | 'body'>): boolean {
  return (
    answer.status === 403 && /ValidatingAdmissionPolicy '.+-consumer-patches'/.test(answer.body.message ?? '')
  );
}

/**
 * Creates the policy and binding the chart rendered, then waits until keyroll's user is refused a
 * (dry-run) create in `namespace`: the policy is in force from then on.
 */
export async function applyConsumerAdmissionPolicy(
  kube: KubeApiServerInfo,
  rendered: readonly { kind?: string }[],
  who: { releaseNamespace: string; serviceAccount: string; namespace: string },
): Promise<void> {
  const policies = rendered.filter(
    (object): object is V1ValidatingAdmissionPolicy => object.kind === 'ValidatingAdmissionPolicy',
  );
  const bindings = rendered.filter(
    (object): object is V1ValidatingAdmissionPolicyBinding =>
      object.kind === 'ValidatingAdmissionPolicyBinding',
  );
  const [policy] = policies;
  const [binding] = bindings;
  if (policy === undefined || binding === undefined || policies.length !== 1 || bindings.length !== 1) {
    throw new Error(
      `the chart rendered ${String(policies.length)} ValidatingAdmissionPolicies and ${String(bindings.length)} bindings for keyroll's consumers; expected one of each (${ADMISSION_POLICY_TEMPLATE})`,
    );
  }
  const api = adminKubeConfig(kube).makeApiClient(AdmissionregistrationV1Api);
  await api.createValidatingAdmissionPolicy({ body: policy });
  await api.createValidatingAdmissionPolicyBinding({ body: binding });
  const user = serviceAccountUser(who.releaseNamespace, who.serviceAccount);
  const probe = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'admission-probe' },
    spec: {
      selector: { matchLabels: { app: 'probe' } },
      template: {
        metadata: { labels: { app: 'probe' } },
        spec: { containers: [{ name: 'app', image: 'registry.invalid/probe:1' }] },
      },
    },
  };
  const deadline = Date.now() + ENFORCED_WITHIN_MS;
  let last: Answer | undefined;
  while (Date.now() < deadline) {
    last = await requestAs(
      kube,
      { user, groups: ['system:masters'] },
      'POST',
      `/apis/apps/v1/namespaces/${who.namespace}/deployments?dryRun=All`,
      probe,
    );
    if (refusedByPolicy(last)) return;
    if (last.status !== 201) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(
    `the chart's ValidatingAdmissionPolicy ${String(policy.metadata?.name)} is not enforced: a create by ${user} answered ${String(last?.status)} ${last?.body.message ?? ''}`,
  );
}
