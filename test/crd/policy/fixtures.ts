// Objects of three teams for the objects → policy tests: billing and payments play by the rules,
// evil is a tenant trying each way around them. Every object goes through KeyrollObject, as the
// watch reads it (defaults applied, unknown fields refused).
import { KeyrollObject } from '../../../src/crd/kinds/kinds.ts';
import type { PolicyOptions } from '../../../src/crd/policy/objects-to-policy.ts';

const API_VERSION = 'keyroll.io/v1alpha1';

export function object(value: Record<string, unknown>): KeyrollObject {
  return KeyrollObject.parse({ apiVersion: API_VERSION, ...value });
}

let clock = 0;
/** A RotatedKey; each one made is newer than the last (creationTimestamp decides who was first). */
export function rotatedKey(namespace: string, name: string, spec: Record<string, unknown>): KeyrollObject {
  clock += 1;
  const creationTimestamp = new Date(Date.UTC(2026, 0, 1, 0, 0, clock)).toISOString().replace('.000', '');
  return object({
    kind: 'RotatedKey',
    metadata: { namespace, name, creationTimestamp },
    spec: { apiRef: { name: 'acme' }, maxAge: '30d', ...spec },
  });
}

export function vaultDestination(path: string, store = 'vault'): Record<string, unknown> {
  return { storeRef: { kind: 'ClusterKeyStore', name: store }, path };
}

export const api = object({
  kind: 'ClusterKeyApi',
  metadata: { name: 'acme' },
  spec: {
    baseUrl: 'https://api.example.com',
    credential: { type: 'bearer', token: 'env:ACME_TOKEN' },
    conditions: [
      { namespaces: ['billing'], organizations: ['org_billing'] },
      {
        namespaceSelector: { matchLabels: { 'keyroll.io/team': 'payments' } },
        organizations: ['org_payments'],
      },
      { namespaces: ['evil'], organizations: ['org_evil'] },
      { namespaces: ['billing', 'evil'], organizations: ['org_shared'] },
    ],
  },
});

/** Every namespace labelled keyroll.io/store writes under teams/<its name>/. */
export const vault = object({
  kind: 'ClusterKeyStore',
  metadata: { name: 'vault' },
  spec: {
    kind: 'vault',
    address: 'https://vault.example.com:8200',
    auth: { method: 'kubernetes', role: 'keyroll' },
    conditions: [
      {
        namespaceSelector: { matchExpressions: [{ key: 'keyroll.io/store', operator: 'Exists' }] },
        pathPrefix: 'teams/{namespace}/',
      },
    ],
  },
});

/** A store the platform team shares under one prefix for all (its mistake, or its choice): paths may collide. */
export const shared = object({
  kind: 'ClusterKeyStore',
  metadata: { name: 'shared' },
  spec: { kind: 'aws', region: 'eu-west-1', conditions: [{ namespaceSelector: {}, pathPrefix: 'shared/' }] },
});

export const billingKey = rotatedKey('billing', 'billing-api', {
  id: 'key_billing',
  organization: 'org_billing',
  destinations: [vaultDestination('teams/billing/api-key')],
  consumers: [{ kind: 'deployment', name: 'billing' }],
});

export const paymentsKey = rotatedKey('payments', 'payments-api', {
  id: 'key_payments',
  organization: 'org_payments',
  destinations: [vaultDestination('teams/payments/api-key')],
});

export const options: PolicyOptions = {
  keyrollNamespace: 'keyroll',
  namespaces: new Map<string, Record<string, string>>([
    ['billing', { 'keyroll.io/store': 'true' }],
    ['payments', { 'keyroll.io/store': 'true', 'keyroll.io/team': 'payments' }],
    ['evil', { 'keyroll.io/store': 'true' }],
    ['keyroll', {}],
  ]),
};

export const honest = [api, vault, shared, billingKey, paymentsKey];
