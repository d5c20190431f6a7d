// keyroll.io objects → the policy document: a document the policy's own schema, checks and
// resolution take unchanged, with the stores as named backends and consumers in the object's
// namespace; two teams share one ClusterKeyStore, each under its own prefix.
import { describe, expect, it } from 'vitest';
import { objectsToPolicy } from '../../../src/crd/policy/objects-to-policy.ts';
import { parsePolicy } from '../../../src/policy/load.ts';
import { PolicyDocument } from '../../../src/policy/schema.ts';
import { honest, object, options, rotatedKey, vaultDestination, api, vault } from './fixtures.ts';

describe('objectsToPolicy', () => {
  it('builds a document the policy schema, checks and resolution take unchanged', () => {
    const { document, keys, refusals } = objectsToPolicy(honest, {
      ...options,
      shared: {
        alerts: PolicyDocument.shape.alerts.parse({
          sinks: { ops: { kind: 'webhook', url: 'https://hooks.example.com/keyroll' } },
        }),
      },
    });
    expect(refusals).toEqual([]);
    expect(document).toBeDefined();
    expect(PolicyDocument.safeParse(document).success).toBe(true);
    // parsePolicy runs the schema, checkPolicy and resolvePolicy: what the daemon would load.
    const policy = parsePolicy(JSON.stringify(document), 'keyroll.io objects');
    expect(
      policy.keys.map((key) => [
        key.id,
        key.organizationId,
        key.destinations[0].backend,
        key.destinations[0].target.path,
      ]),
    ).toEqual([
      ['key_billing', 'org_billing', 'clusterkeystore.vault', 'teams/billing/api-key'],
      ['key_payments', 'org_payments', 'clusterkeystore.vault', 'teams/payments/api-key'],
    ]);
    expect(policy.keys[0]?.consumers).toEqual([
      { kind: 'deployment', namespace: 'billing', name: 'billing' },
    ]);
    expect(policy.api.baseUrl).toBe('https://api.example.com');
    expect(Object.keys(policy.backends)).toEqual(['clusterkeystore.vault']);
    expect(Object.keys(policy.alerts.sinks)).toEqual(['ops']);
    expect(keys).toEqual(
      new Map([
        ['billing/billing-api', 'key_billing'],
        ['payments/payments-api', 'key_payments'],
      ]),
    );
  });

  it('lets two namespaces share one ClusterKeyStore, each under its own prefix', () => {
    const billing = rotatedKey('billing', 'same-name', {
      id: 'key_b2',
      organization: 'org_billing',
      destinations: [vaultDestination('teams/billing/token')],
    });
    const payments = rotatedKey('payments', 'same-name', {
      id: 'key_p2',
      organization: 'org_payments',
      destinations: [vaultDestination('teams/payments/token')],
    });
    const { document, keys, refusals } = objectsToPolicy([api, vault, billing, payments], options);
    expect(refusals).toEqual([]);
    expect(document?.keys.map((key) => key.destinations[0]?.path)).toEqual([
      'teams/billing/token',
      'teams/payments/token',
    ]);
    expect([...keys.keys()]).toEqual(['billing/same-name', 'payments/same-name']);
  });

  it("accepts a KeyStore in keyroll's own namespace for keys of that namespace", () => {
    const store = object({
      kind: 'KeyStore',
      metadata: { namespace: 'keyroll', name: 'files' },
      spec: { kind: 'file', directory: '/var/lib/keyroll/secrets' },
    });
    const platformApi = object({
      kind: 'ClusterKeyApi',
      metadata: { name: 'acme' },
      spec: {
        ...(api.spec as Record<string, unknown>),
        conditions: [{ namespaces: ['keyroll'], organizations: ['org_platform'] }],
      },
    });
    const key = rotatedKey('keyroll', 'platform', {
      id: 'key_platform',
      organization: 'org_platform',
      destinations: [{ storeRef: { kind: 'KeyStore', name: 'files' }, path: 'platform.json' }],
    });
    const { document, refusals } = objectsToPolicy([platformApi, store, key], options);
    expect(refusals).toEqual([]);
    expect(document?.backends).toEqual({
      'keystore.keyroll.files': { kind: 'file', directory: '/var/lib/keyroll/secrets' },
    });
  });

  it('returns no document when every key is refused, and says why', () => {
    const { document, keys, refusals } = objectsToPolicy(
      [
        vault,
        rotatedKey('billing', 'x', {
          id: 'k',
          organization: 'org_billing',
          destinations: [vaultDestination('teams/billing/x')],
        }),
      ],
      options,
    );
    expect(document).toBeUndefined();
    expect(keys.size).toBe(0);
    expect(refusals.map((refusal) => refusal.reason)).toEqual(['ApiNotFound']);
  });
});
