// Issue 31, tenancy, tried by a hostile tenant on the real kube-apiserver (RBAC on, the keyroll.io
// CRDs of deploy/crds applied): what reaches keyroll. The team `attacker`, with the Role
// docs/crds.md gives a team, creates each try through the API server's impersonation
// (kube-tenancy-world.ts); what the API server stores is read back as keyroll's watch reads it and
// built into a policy by objectsToPolicy, which refuses it with its reason while billing's keys stay.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubeApiServer } from './servers.ts';
import { API_VERSION, tenancyWorld } from './kube-tenancy-world.ts';

const server = await kubeApiServer();

if (server === undefined) {
  describe.skip('tenancy on the real kube-apiserver: what keyroll refuses a hostile tenant, with its reason (the Kubernetes API server is not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const world = tenancyWorld(server);
  const {
    attackerNs,
    billingNs,
    billingOnly,
    vault,
    shared,
    overGranted,
    options,
    to,
    created,
    attempt,
    view,
    expectBillingKept,
  } = world;

  describe('tenancy on the real kube-apiserver: what keyroll refuses a hostile tenant, with its reason', () => {
    beforeAll(() => world.setUp());
    afterAll(() => world.close());

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

      it("leaves a key naming another keyroll's ClusterKeyApi to it, which refuses it: its conditions do not admit it", async () => {
        const spec = {
          id: 'key_attacker_api',
          organization: 'org_billing',
          apiRef: { name: billingOnly },
          destinations: [to(vault, `teams/${attackerNs}/api`)],
        };
        // Another install's key, to judge and report (kube-crd-installs.test.ts): not refused here.
        const notServed = await attempt('other-api', spec);
        expect(notServed.refusal).toBeUndefined();
        expect(notServed.view.others).toContain(`${attackerNs}/other-api`);
        // The keyroll that serves billing-only: its conditions admit billing alone.
        const served = await view({ ...options, api: billingOnly });
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
    });
  });
}
