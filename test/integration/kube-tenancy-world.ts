// The world the hostile-tenant tests on the real kube-apiserver share (test/integration/
// kube-crd-tenancy*.test.ts): three namespaces of their own (attacker, billing, keyroll's), the
// platform team's ClusterKeyApis and ClusterKeyStores, the Role docs/crds.md gives a team bound to
// each team's group, a Role a careless platform team gave one attacker beside it, and billing's two
// working keys, created first. Each test file builds its own (names carry a random suffix).
import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { PolicyOptions } from '../../src/crd/policy/objects-to-policy.ts';
import { adminAgent, installKeyrollCrds } from '../support/keyroll-crds.ts';
import type { KubeApiServerInfo } from '../support/kube-apiserver.ts';
import { waitFor } from '../support/wait-for.ts';
import {
  collection,
  grant,
  keyrollView,
  kubeAs,
  teamRoleFromDocs,
  type Answer,
  type Caller,
  type Kube,
} from './kube-tenancy-support.ts';

export const API_VERSION = 'keyroll.io/v1alpha1';

/** What a call needs of an object: its kind, and its namespace when it has one. */
interface Manifest {
  apiVersion?: string;
  kind: string;
  spec?: unknown;
  metadata: { name: string; namespace?: string };
}

export type TenancyWorld = ReturnType<typeof tenancyWorld>;

export function tenancyWorld(server: KubeApiServerInfo) {
  const suffix = randomBytes(4).toString('hex');
  // "attacker" sorts before "billing": when the two claim one id or path, only the creation time
  // (never the name) can be why billing keeps it.
  const attackerNs = `attacker-${suffix}`;
  const billingNs = `billing-${suffix}`;
  const keyrollNs = `keyroll-${suffix}`;
  const acme = `acme-${suffix}`;
  const billingOnly = `billing-only-${suffix}`;
  const vault = `vault-${suffix}`;
  const shared = `shared-${suffix}`;
  const restricted = `restricted-${suffix}`;
  const restrictedLabel = `keyroll.io/restricted-${suffix}`;

  const attacker: Caller = { user: `alice-${suffix}`, groups: [`team-attacker-${suffix}`] };
  const billing: Caller = { user: `bob-${suffix}`, groups: [`team-billing-${suffix}`] };
  // The attacker's team lead, to whom a careless platform team also granted what docs/crds.md says
  // never to grant a team: KeyStores, and patch on its own Namespace object.
  const overGranted: Caller = { user: `carol-${suffix}`, groups: [`team-attacker-${suffix}`] };

  const options: Omit<PolicyOptions, 'namespaces'> = { keyrollNamespace: keyrollNs, api: acme };

  const clusterKeyApi = (name: string, conditions: unknown[]) => {
    return {
      apiVersion: API_VERSION,
      kind: 'ClusterKeyApi',
      metadata: { name },
      spec: {
        baseUrl: 'https://api.example.com',
        credential: { type: 'bearer', token: 'file:/var/run/secrets/keyroll/token' },
        conditions,
      },
    };
  };

  const clusterKeyStore = (name: string, conditions: unknown[]) => {
    return {
      apiVersion: API_VERSION,
      kind: 'ClusterKeyStore',
      metadata: { name },
      spec: { kind: 'aws', region: 'eu-west-1', conditions },
    };
  };

  const rotatedKey = (namespace: string, name: string, spec: Record<string, unknown>) => {
    return {
      apiVersion: API_VERSION,
      kind: 'RotatedKey',
      metadata: { name, namespace },
      spec: { apiRef: { name: acme }, maxAge: '30d', ...spec },
    };
  };

  const to = (store: string, path: string) => ({ storeRef: { kind: 'ClusterKeyStore', name: store }, path });

  const agent = adminAgent(server);
  const api: Kube = kubeAs(server, agent);
  const create = (as: Caller, object: Manifest): Promise<Answer> =>
    api.call(as, 'POST', collection(object.kind, object.metadata.namespace), object);
  const created = async (as: Caller, object: Manifest) => {
    const answer = await create(as, object);
    expect(answer.status, answer.body.message).toBe(201);
    return answer.body as { metadata: { creationTimestamp: string } };
  };
  /** keyroll's view of this world's objects (serving the ClusterKeyApi `acme` unless told). */
  const view = (opts = options) =>
    keyrollView(api, { namespaces: [attackerNs, billingNs, keyrollNs], suffix }, opts);
  /** The attacker's RotatedKey `name`, created as the attacker, and keyroll's verdict on it. */
  const attempt = async (name: string, spec: Record<string, unknown>, opts = options) => {
    await created(attacker, rotatedKey(attackerNs, name, spec));
    const policy = await view(opts);
    return {
      view: policy,
      refusal: policy.refusals.find((r) => r.object.namespace === attackerNs && r.object.name === name),
    };
  };
  const expectBillingKept = (keys: Map<string, string>): void => {
    expect(keys.get(`${billingNs}/billing-api`)).toBe('key_billing_main');
    expect(keys.get(`${billingNs}/billing-shared`)).toBe('key_shared_1');
  };

  const setUp = async (): Promise<void> => {
    await installKeyrollCrds(server);
    for (const name of [attackerNs, billingNs, keyrollNs]) {
      const answer = await api.call('admin', 'POST', '/api/v1/namespaces', { metadata: { name } });
      expect(answer.status).toBe(201);
    }
    const role = await teamRoleFromDocs();
    await grant(api, attackerNs, 'keyroll-keys', role.rules, {
      kind: 'Group',
      name: `team-attacker-${suffix}`,
    });
    await grant(api, billingNs, 'keyroll-keys', role.rules, {
      kind: 'Group',
      name: `team-billing-${suffix}`,
    });
    await grant(
      api,
      attackerNs,
      'too-much',
      [
        { apiGroups: ['keyroll.io'], resources: ['keystores'], verbs: ['create', 'get', 'list'] },
        { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'patch'] },
      ],
      { kind: 'User', name: `carol-${suffix}` },
    );
    // The platform team's objects.
    await created(
      'admin',
      clusterKeyApi(acme, [
        { namespaces: [billingNs], organizations: ['org_billing'] },
        // The key-id gap closed for the attacker's team: only key ids its team was given.
        { namespaces: [attackerNs], organizations: ['org_attacker'], keyIds: ['key_attacker_*'] },
        // An organization two teams share, without keyIds: only the claims keep them apart.
        { namespaces: [billingNs, attackerNs], organizations: ['org_shared'] },
      ]),
    );
    await created(
      'admin',
      clusterKeyApi(billingOnly, [{ namespaces: [billingNs], organizations: ['org_billing'] }]),
    );
    await created('admin', {
      apiVersion: API_VERSION,
      kind: 'ClusterKeyStore',
      metadata: { name: vault },
      spec: {
        kind: 'vault',
        address: 'https://vault.example.com:8200',
        auth: { method: 'kubernetes', role: 'keyroll' },
        conditions: [{ namespaces: [billingNs, attackerNs], pathPrefix: 'teams/{namespace}/' }],
      },
    });
    await created(
      'admin',
      clusterKeyStore(shared, [{ namespaces: [billingNs, attackerNs], pathPrefix: 'shared/' }]),
    );
    await created(
      'admin',
      clusterKeyStore(restricted, [{ namespaceSelector: { matchLabels: { [restrictedLabel]: 'true' } } }]),
    );
    // Billing's working keys, written by billing with the same Role: the Role is enough for an honest team.
    const first = await created(
      billing,
      rotatedKey(billingNs, 'billing-api', {
        id: 'key_billing_main',
        organization: 'org_billing',
        destinations: [to(vault, `teams/${billingNs}/api-key`)],
      }),
    );
    await created(
      billing,
      rotatedKey(billingNs, 'billing-shared', {
        id: 'key_shared_1',
        organization: 'org_shared',
        destinations: [to(shared, 'shared/billing-token')],
      }),
    );
    // creationTimestamp has whole seconds: every object the attacker makes is strictly newer.
    const createdAt = Date.parse(first.metadata.creationTimestamp);
    await waitFor(() => Date.now() >= createdAt + 1_100, 'a second after billing created its keys');
  };
  const close = (): Promise<void> => agent.close();

  return {
    suffix,
    attackerNs,
    billingNs,
    keyrollNs,
    acme,
    billingOnly,
    vault,
    shared,
    restricted,
    restrictedLabel,
    attacker,
    billing,
    overGranted,
    options,
    clusterKeyApi,
    clusterKeyStore,
    rotatedKey,
    to,
    api,
    create,
    created,
    attempt,
    view,
    expectBillingKept,
    setUp,
    close,
  };
}
