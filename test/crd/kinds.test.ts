// The keyroll.io kinds' zod schemas (src/crd/kinds/): what `keyroll validate` and the daemon will
// read objects with. They refuse what the CRD's CEL rules refuse, with the same messages, at the
// same field, and they are strict where the API server only prunes (a consumer's namespace).
import { describe, expect, it } from 'vitest';
import { KeyrollObject } from '../../src/crd/kinds/kinds.ts';
import { ClusterKeyStoreSpec } from '../../src/crd/kinds/key-store.ts';
import { RotatedKeySpec } from '../../src/crd/kinds/rotated-key.ts';
import { customResourceDefinition } from '../../src/crd/schema/crds.ts';

const key = {
  id: 'key_billing',
  organization: 'org_billing',
  apiRef: { name: 'acme' },
  destinations: [{ storeRef: { kind: 'KeyStore', name: 'aws' }, path: 'billing/api-key' }],
  maxAge: '30d',
};

/** The issues of a failed parse, as `path: message`. */
function issuesOf(result: {
  success: boolean;
  error?: { issues: { path: PropertyKey[]; message: string }[] };
}) {
  return (result.error?.issues ?? []).map((issue) => `${issue.path.map(String).join('.')}: ${issue.message}`);
}

/** The CEL rules of the RotatedKey spec in the generated CRD. */
function specRules(): { message: string; fieldPath?: string }[] {
  const crd = customResourceDefinition('RotatedKey') as {
    spec: { versions: { schema: { openAPIV3Schema: { properties: { spec: Record<string, unknown> } } } }[] };
  };
  const spec = crd.spec.versions[0]?.schema.openAPIV3Schema.properties.spec;
  return (spec?.['x-kubernetes-validations'] as { message: string; fieldPath?: string }[] | undefined) ?? [];
}

describe('the keyroll.io kinds', () => {
  it('read a valid object of each kind', () => {
    const objects = [
      { kind: 'RotatedKey', metadata: { name: 'billing-api', namespace: 'billing' }, spec: key },
      { kind: 'KeyStore', metadata: { name: 'aws', namespace: 'billing' }, spec: { kind: 'aws' } },
      {
        kind: 'ClusterKeyStore',
        metadata: { name: 'vault' },
        spec: {
          kind: 'vault',
          address: 'https://vault.example.com',
          auth: { method: 'kubernetes', role: 'keyroll' },
          conditions: [{ namespaces: ['billing'] }],
        },
      },
      {
        kind: 'ClusterKeyApi',
        metadata: { name: 'acme' },
        spec: {
          baseUrl: 'https://api.example.com',
          credential: { type: 'bearer', token: 'env:TOKEN' },
          conditions: [{ namespaceSelector: {}, organizations: ['org_billing'] }],
        },
      },
    ];
    for (const object of objects)
      expect(issuesOf(KeyrollObject.safeParse({ apiVersion: 'keyroll.io/v1alpha1', ...object }))).toEqual([]);
  });

  it('refuse a consumer that names a namespace: a consumer is in the key object’s own namespace', () => {
    const result = RotatedKeySpec.safeParse({
      ...key,
      consumers: [{ kind: 'deployment', name: 'payments', namespace: 'other-team' }],
    });
    expect(issuesOf(result)).toEqual(['consumers.0: Unrecognized key: "namespace"']);
  });

  it('refuse with the CRD rule’s message at its field: slots without consumerRefresh, consumerRefresh without slots, equal slots', () => {
    const messageAt = (fieldPath: string, start: string): string =>
      specRules().find((rule) => rule.fieldPath === fieldPath && rule.message.startsWith(start))?.message ??
      'none';
    expect(issuesOf(RotatedKeySpec.safeParse({ ...key, slots: ['key_a', 'key_b'] }))).toEqual([
      `consumerRefresh: ${messageAt('.consumerRefresh', 'consumerRefresh is required')}`,
    ]);
    expect(issuesOf(RotatedKeySpec.safeParse({ ...key, consumerRefresh: '1h' }))).toEqual([
      `consumerRefresh: ${messageAt('.consumerRefresh', 'consumerRefresh applies')}`,
    ]);
    expect(
      issuesOf(RotatedKeySpec.safeParse({ ...key, slots: ['key_a', 'key_a'], consumerRefresh: '1h' })),
    ).toEqual([`slots: ${messageAt('.slots', 'slots')}`]);
  });

  it('refuse a key that is never due (no schedule, no maxAge), and a null maxAge (nothing is inherited here)', () => {
    const { maxAge: _maxAge, ...neverDue } = key;
    expect(issuesOf(RotatedKeySpec.safeParse(neverDue))).toEqual([
      ': has neither a schedule nor a maxAge, so it would never be due; set one',
    ]);
    expect(RotatedKeySpec.safeParse({ ...neverDue, maxAge: null }).success).toBe(false);
  });

  it('refuse a cluster store condition that admits nobody, and a selector requirement In without values', () => {
    const store = { kind: 'file', directory: '/var/lib/keyroll' };
    expect(issuesOf(ClusterKeyStoreSpec.safeParse({ ...store, conditions: [{ pathPrefix: 'x/' }] }))).toEqual(
      ['conditions.0: a condition needs namespaces or a namespaceSelector ({} selects every namespace)'],
    );
    const selector = { matchExpressions: [{ key: 'team', operator: 'In' }] };
    expect(
      issuesOf(ClusterKeyStoreSpec.safeParse({ ...store, conditions: [{ namespaceSelector: selector }] })),
    ).toEqual([
      'conditions.0.namespaceSelector.matchExpressions.0.values: In and NotIn need values; Exists and DoesNotExist take none',
    ]);
    expect(issuesOf(ClusterKeyStoreSpec.safeParse({ ...store, conditions: [] }))).toEqual([
      'conditions: a cluster store needs at least one condition (which namespaces may use it)',
    ]);
  });
});
