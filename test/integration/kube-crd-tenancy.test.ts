// Issue 31, tenancy, tried by a hostile tenant on the real kube-apiserver (RBAC on, the keyroll.io
// CRDs of deploy/crds applied). The team `attacker` holds exactly the Role docs/crds.md gives a
// team, in its own namespace, and sends every request through the API server's impersonation.
// Each try goes end to end: RBAC or admission (schema, CEL, pruning) refuses what it can; what the
// API server stores is read back as keyroll's watch reads it and built into a policy by
// objectsToPolicy, which refuses the rest with its reason, while billing's keys stay in the policy.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PolicyOptions } from '../../src/crd/policy/objects-to-policy.ts';
import { adminAgent, installKeyrollCrds } from '../support/keyroll-crds.ts';
import { waitFor } from '../support/wait-for.ts';
import { kubeApiServer } from './servers.ts';
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

const server = await kubeApiServer();

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

const API_VERSION = 'keyroll.io/v1alpha1';
const options: Omit<PolicyOptions, 'namespaces'> = { keyrollNamespace: keyrollNs, api: acme };

function clusterKeyApi(name: string, conditions: unknown[]) {
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
}

function clusterKeyStore(name: string, conditions: unknown[]) {
  return {
    apiVersion: API_VERSION,
    kind: 'ClusterKeyStore',
    metadata: { name },
    spec: { kind: 'aws', region: 'eu-west-1', conditions },
  };
}

function rotatedKey(namespace: string, name: string, spec: Record<string, unknown>) {
  return {
    apiVersion: API_VERSION,
    kind: 'RotatedKey',
    metadata: { name, namespace },
    spec: { apiRef: { name: acme }, maxAge: '30d', ...spec },
  };
}

/** What a call needs of an object: its kind, and its namespace when it has one. */
interface Manifest {
  apiVersion?: string;
  kind: string;
  spec?: unknown;
  metadata: { name: string; namespace?: string };
}

const to = (store: string, path: string) => ({ storeRef: { kind: 'ClusterKeyStore', name: store }, path });

if (server === undefined) {
  describe.skip('tenancy on the real kube-apiserver (not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const agent = adminAgent(server);
  const api: Kube = kubeAs(server, agent);
  const create = (as: Caller, object: Manifest): Promise<Answer> =>
    api.call(as, 'POST', collection(object.kind, object.metadata.namespace), object);
  const created = async (as: Caller, object: Manifest) => {
    const answer = await create(as, object);
    expect(answer.status, answer.body.message).toBe(201);
    return answer.body as { metadata: { creationTimestamp: string } };
  };
  /** The attacker's RotatedKey `name`, created as the attacker, and keyroll's verdict on it. */
  const attempt = async (name: string, spec: Record<string, unknown>, opts = options) => {
    await created(attacker, rotatedKey(attackerNs, name, spec));
    const view = await keyrollView(api, { namespaces: [attackerNs, billingNs, keyrollNs], suffix }, opts);
    return {
      view,
      refusal: view.refusals.find((r) => r.object.namespace === attackerNs && r.object.name === name),
    };
  };
  const expectBillingKept = (keys: Map<string, string>): void => {
    expect(keys.get(`${billingNs}/billing-api`)).toBe('key_billing_main');
    expect(keys.get(`${billingNs}/billing-shared`)).toBe('key_shared_1');
  };

  describe('tenancy on the real kube-apiserver: a hostile tenant with the Role docs/crds.md gives a team', () => {
    beforeAll(async () => {
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
    });
    afterAll(async () => {
      await agent.close();
    });

    describe('RBAC refuses what the Role does not grant', () => {
      it("refuses a RotatedKey in billing's namespace", async () => {
        const answer = await create(
          attacker,
          rotatedKey(billingNs, 'planted', {
            id: 'key_attacker_1',
            organization: 'org_billing',
            destinations: [to(vault, `teams/${billingNs}/x`)],
          }),
        );
        expect(answer.status).toBe(403);
      });

      it('refuses creating or changing a ClusterKeyStore or ClusterKeyApi (they say who may use what)', async () => {
        const own = await create(
          attacker,
          clusterKeyStore(`mine-${suffix}`, [{ namespaces: [attackerNs], pathPrefix: 'teams/' }]),
        );
        expect(own.status).toBe(403);
        const widen = await api.call(
          attacker,
          'PATCH',
          `${collection('ClusterKeyApi')}/${acme}`,
          { spec: { conditions: [{ namespaces: [attackerNs], organizations: ['org_billing'] }] } },
          'application/merge-patch+json',
        );
        expect(widen.status).toBe(403);
      });

      it("refuses writing a RotatedKey status (only keyroll's leader writes it)", async () => {
        await created(
          attacker,
          rotatedKey(attackerNs, 'status-forger', {
            id: 'key_attacker_sf',
            organization: 'org_attacker',
            destinations: [to(vault, `teams/${attackerNs}/sf`)],
          }),
        );
        const answer = await api.call(
          attacker,
          'PATCH',
          `${collection('RotatedKey', attackerNs)}/status-forger/status`,
          {
            status: {
              conditions: [
                {
                  type: 'Ready',
                  status: 'True',
                  reason: 'Rotated',
                  message: 'forged',
                  lastTransitionTime: '2026-11-29T08:00:00Z',
                },
              ],
            },
          },
          'application/merge-patch+json',
        );
        expect(answer.status).toBe(403);
      });

      it('refuses a KeyStore of its own under the docs Role', async () => {
        const answer = await create(attacker, {
          apiVersion: API_VERSION,
          kind: 'KeyStore',
          metadata: { name: 'mine', namespace: attackerNs },
          spec: { kind: 'aws', region: 'eu-west-1' },
        });
        expect(answer.status).toBe(403);
      });
    });

    describe('admission (schema, CEL, pruning) refuses or strips what it can', () => {
      it("prunes a consumer namespace, so the consumer is in the key's own namespace (strict validation: refused)", async () => {
        const consumers = [{ kind: 'deployment', name: 'billing', namespace: billingNs }];
        const spec = {
          id: 'key_attacker_c',
          organization: 'org_attacker',
          destinations: [to(vault, `teams/${attackerNs}/c`)],
          consumers,
        };
        const strict = await api.call(
          attacker,
          'POST',
          `${collection('RotatedKey', attackerNs)}?fieldValidation=Strict`,
          rotatedKey(attackerNs, 'consumer-strict', spec),
        );
        expect(strict.status).toBe(400);
        expect(strict.body.message).toContain('unknown field "spec.consumers[0].namespace"');

        const { view, refusal } = await attempt('consumer', spec);
        expect(refusal).toBeUndefined();
        const entry = view.document?.keys.find((key) => key.id === 'key_attacker_c');
        expect(entry?.consumers).toEqual([{ kind: 'deployment', name: 'billing', namespace: attackerNs }]);
      });

      it('refuses a storeRef of a kind that is not a store, and a malformed keyIds pattern', async () => {
        const kind = await create(
          attacker,
          rotatedKey(attackerNs, 'secret-ref', {
            id: 'key_attacker_s',
            organization: 'org_attacker',
            destinations: [{ storeRef: { kind: 'Secret', name: 'x' }, path: 'x' }],
          }),
        );
        expect(kind.status).toBe(422);
        expect(kind.body.message).toContain('spec.destinations[0].storeRef.kind');
        const pattern = await create(
          'admin',
          clusterKeyApi(`bad-keyids-${suffix}`, [
            { namespaces: [attackerNs], organizations: ['o'], keyIds: ['*'] },
          ]),
        );
        expect(pattern.status).toBe(422);
        expect(pattern.body.message).toContain('spec.conditions[0].keyIds[0]');
      });
    });

    describe('keyroll refuses what reaches it, with its reason; billing keeps rotating', () => {
      const escapes: [string, string, string][] = [
        ['other-prefix', `teams/${billingNs}/api-key`, 'PathOutsidePrefix'],
        ['dotdot', `teams/${attackerNs}/../${billingNs}/api-key`, 'PathOutsidePrefix'],
        ['encoded', `teams/${attackerNs}/%2e%2e/${billingNs}/api-key`, 'PathOutsidePrefix'],
        [
          'double-encoded',
          `teams/${attackerNs}/%252e%252e%252f${billingNs}%252fapi-key`,
          'PathOutsidePrefix',
        ],
        ['absolute', `/teams/${billingNs}/api-key`, 'PathOutsidePrefix'],
        ['backslash', `teams\\${billingNs}\\api-key`, 'PathOutsidePrefix'],
        ['lookalike', `teams/${attackerNs}-x/y`, 'PathOutsidePrefix'],
        ['trailing-dotdot', `teams/${attackerNs}/x/..`, 'PathOutsidePrefix'],
        ['absolute-own', `/teams/${attackerNs}/x`, 'PathNotCanonical'],
        ['trailing-slash', `teams/${attackerNs}/x/`, 'PathNotCanonical'],
        ['trailing-dot', `teams/${attackerNs}/x/.`, 'PathNotCanonical'],
      ];
      it.each(escapes)('refuses a path that escapes its prefix: %s', async (name, path, reason) => {
        const { view, refusal } = await attempt(`path-${name}`, {
          id: `key_attacker_path_${name}`,
          organization: 'org_attacker',
          destinations: [to(vault, path)],
        });
        expect(refusal?.reason).toBe(reason);
        expect(refusal?.message).not.toContain(`billing-api`);
        expectBillingKept(view.keys);
      });

      it("refuses a key of an organization its ClusterKeyApi condition does not admit (billing's)", async () => {
        const { view, refusal } = await attempt('org', {
          id: 'key_attacker_org',
          organization: 'org_billing',
          destinations: [to(vault, `teams/${attackerNs}/org`)],
        });
        expect(refusal?.reason).toBe('OrganizationNotAdmitted');
        expectBillingKept(view.keys);
      });

      it("refuses a key id outside its condition's keyIds: billing's id under its own organization", async () => {
        const { view, refusal } = await attempt('key-id', {
          id: 'key_billing_main',
          organization: 'org_attacker',
          destinations: [to(vault, `teams/${attackerNs}/key-id`)],
        });
        expect(refusal?.reason).toBe('KeyIdNotAdmitted');
        expectBillingKept(view.keys);
      });

      it('refuses a copycat of a key id of a shared organization: the later object, never the working key', async () => {
        const { view, refusal } = await attempt('copy-id', {
          id: 'key_shared_1',
          organization: 'org_shared',
          destinations: [to(shared, 'shared/attacker-token')],
        });
        expect(refusal?.reason).toBe('KeyIdInUse');
        expect(refusal?.message).not.toContain(billingNs);
        expectBillingKept(view.keys);
      });

      it('refuses a copycat of a store path: the later object, never the working key', async () => {
        const { view, refusal } = await attempt('copy-path', {
          id: 'key_shared_2',
          organization: 'org_shared',
          destinations: [to(shared, 'shared/billing-token')],
        });
        expect(refusal?.reason).toBe('PathInUse');
        expect(refusal?.message).not.toContain(billingNs);
        expectBillingKept(view.keys);
      });

      it("refuses a key naming a ClusterKeyApi that does not admit it (another keyroll's, or the one served)", async () => {
        const spec = {
          id: 'key_attacker_api',
          organization: 'org_billing',
          apiRef: { name: billingOnly },
          destinations: [to(vault, `teams/${attackerNs}/api`)],
        };
        const notServed = await attempt('other-api', spec);
        expect(notServed.refusal?.reason).toBe('ApiNotServed');
        // The keyroll that serves billing-only: its conditions admit billing alone.
        const served = await keyrollView(
          api,
          { namespaces: [attackerNs, billingNs, keyrollNs], suffix },
          { ...options, api: billingOnly },
        );
        const refusal = served.refusals.find(
          (r) => r.object.namespace === attackerNs && r.object.name === 'other-api',
        );
        expect(refusal?.reason).toBe('OrganizationNotAdmitted');
      });

      it('refuses a KeyStore of its own whatever it holds, and the key naming it, when a platform granted KeyStores', async () => {
        const stores: [string, Record<string, unknown>, string][] = [
          ['aws', { kind: 'aws', region: 'eu-west-1' }, 'KeyStoreAmbientIdentity'],
          [
            'files',
            { kind: 'file', directory: '/var/run/secrets/kubernetes.io/serviceaccount' },
            'KeyStoreLocalReference',
          ],
          [
            'vault',
            {
              kind: 'vault',
              address: 'https://vault.attacker.example',
              auth: { method: 'kubernetes', role: 'r' },
            },
            'KeyStoreLocalReference',
          ],
        ];
        for (const [name, spec] of stores)
          await created(overGranted, {
            apiVersion: API_VERSION,
            kind: 'KeyStore',
            metadata: { name, namespace: attackerNs },
            spec,
          });
        const { view, refusal } = await attempt('own-store', {
          id: 'key_attacker_store',
          organization: 'org_attacker',
          destinations: [{ storeRef: { kind: 'KeyStore', name: 'files' }, path: 'token' }],
        });
        expect(refusal?.reason).toBe('KeyStoreRefused');
        for (const [name, , reason] of stores)
          expect(
            view.refusals.find((r) => r.object.kind === 'KeyStore' && r.object.name === name)?.reason,
          ).toBe(reason);
        expect(
          Object.keys(view.document?.backends ?? {}).some((backend) => backend.startsWith('keystore.')),
        ).toBe(false);
        expectBillingKept(view.keys);
      });

      it('cannot label its own namespace into a namespaceSelector with the docs Role; a Role granting namespaces patch can', async () => {
        const spec = {
          id: 'key_attacker_label',
          organization: 'org_attacker',
          destinations: [to(restricted, `${attackerNs}/label`)],
        };
        const before = await attempt('label', spec);
        expect(before.refusal?.reason).toBe('StoreNotAdmitted');
        const label = { metadata: { labels: { [restrictedLabel]: 'true' } } };
        const namespacePath = `/api/v1/namespaces/${attackerNs}`;
        // Namespaces are cluster-scoped, but the API server authorizes a request on
        // /api/v1/namespaces/NAME in namespace NAME: a Role in a team's namespace that grants
        // `patch` on `namespaces` lets the team relabel its own Namespace. The docs Role grants none.
        const refused = await api.call(
          attacker,
          'PATCH',
          namespacePath,
          label,
          'application/merge-patch+json',
        );
        expect(refused.status).toBe(403);
        // kubernetes.io/metadata.name is the API server's: set to the name whatever a patch says.
        const renamed = await api.call(
          overGranted,
          'PATCH',
          namespacePath,
          { metadata: { labels: { 'kubernetes.io/metadata.name': billingNs } } },
          'application/merge-patch+json',
        );
        expect(renamed.status).toBe(200);
        expect(
          (renamed.body['metadata'] as { labels: Record<string, string> }).labels[
            'kubernetes.io/metadata.name'
          ],
        ).toBe(attackerNs);
        const granted = await api.call(
          overGranted,
          'PATCH',
          namespacePath,
          label,
          'application/merge-patch+json',
        );
        expect(granted.status).toBe(200);
        const after = await keyrollView(
          api,
          { namespaces: [attackerNs, billingNs, keyrollNs], suffix },
          options,
        );
        expect(after.refusals.find((r) => r.object.name === 'label')).toBeUndefined();
        expect(after.keys.get(`${attackerNs}/label`)).toBe('key_attacker_label');
      });
    });
  });
}
