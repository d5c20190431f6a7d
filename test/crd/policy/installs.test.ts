// Two keyroll installs in one cluster (docs/crds.md, "Two keyroll installs"): each watches every
// RotatedKey, and judges only those naming the ClusterKeyApi its settings name (`keyApi`). A key
// of the other install is neither a key nor a refusal here (nothing audited, no status written);
// it still holds what it claims where both installs would act on one thing: a store path (one
// secret), a key id on the same API server (one key). Install A serves `acme`, install B `globex`.
import { describe, expect, it } from 'vitest';
import type { KeyrollObject } from '../../../src/crd/kinds/kinds.ts';
import { objectsToPolicy, type PolicyOptions } from '../../../src/crd/policy/objects-to-policy.ts';
import { api, honest, object, options, rotatedKey, vaultDestination } from './fixtures.ts';

const A: PolicyOptions = { ...options, api: 'acme' };
const B: PolicyOptions = { ...options, api: 'globex' };

/** Another API, on another server, admitting billing and evil as acme does. */
function otherApi(name: string, baseUrl: string): KeyrollObject {
  return object({
    kind: 'ClusterKeyApi',
    metadata: { name },
    spec: {
      baseUrl,
      credential: { type: 'bearer', token: 'env:GLOBEX_TOKEN' },
      conditions: [
        { namespaces: ['billing'], organizations: ['org_billing'] },
        { namespaces: ['evil'], organizations: ['org_evil'] },
      ],
    },
  });
}
const globex = otherApi('globex', 'https://api.globex.example');

/** A RotatedKey of install B (apiRef globex), newer than every key made before it. */
function globexKey(namespace: string, name: string, spec: Record<string, unknown>): KeyrollObject {
  return rotatedKey(namespace, name, { apiRef: { name: 'globex' }, organization: 'org_billing', ...spec });
}

const reasonsOf = (refusals: { object: { namespace?: string; name: string }; reason: string }[]) =>
  refusals.map((refusal) => `${refusal.object.namespace ?? ''}/${refusal.object.name} ${refusal.reason}`);

describe('two keyroll installs: each judges only the RotatedKeys of its own ClusterKeyApi', () => {
  const billingGlobex = globexKey('billing', 'globex-api', {
    id: 'key_globex',
    destinations: [vaultDestination('teams/billing/globex')],
  });

  it("leaves the other install's keys alone: neither keys nor refusals, listed as others", () => {
    const objects = [...honest, globex, billingGlobex];
    const a = objectsToPolicy(objects, A);
    expect([...a.keys]).toEqual([
      ['billing/billing-api', 'key_billing'],
      ['payments/payments-api', 'key_payments'],
    ]);
    expect(a.refusals).toEqual([]);
    expect(a.others).toEqual(['billing/globex-api']);

    const b = objectsToPolicy(objects, B);
    expect([...b.keys]).toEqual([['billing/globex-api', 'key_globex']]);
    expect(b.refusals).toEqual([]);
    expect(b.others).toEqual(['billing/billing-api', 'payments/payments-api']);
    expect(b.document?.api.baseUrl).toBe('https://api.globex.example');
  });

  it('leaves a key the other install refuses to that install: its refusal is written once, by it', () => {
    const refused = globexKey('evil', 'try', {
      id: 'key_evil_try',
      organization: 'org_payments',
      destinations: [vaultDestination('teams/evil/x')],
    });
    const objects = [...honest, globex, refused];
    expect(reasonsOf(objectsToPolicy(objects, A).refusals)).toEqual([]);
    expect(reasonsOf(objectsToPolicy(objects, B).refusals)).toEqual(['evil/try OrganizationNotAdmitted']);
  });

  it('says ApiNotFound for a missing ClusterKeyApi only where the settings name it, or name none', () => {
    const missing = rotatedKey('billing', 'later', {
      id: 'key_later',
      organization: 'org_billing',
      apiRef: { name: 'later' },
      destinations: [vaultDestination('teams/billing/later')],
    });
    const objects = [...honest, globex, missing];
    // Installs A and B serve other APIs: the key is not theirs, nor its refusal.
    for (const install of [A, B]) {
      const built = objectsToPolicy(objects, install);
      expect(reasonsOf(built.refusals)).toEqual([]);
      expect(built.others).toContain('billing/later');
    }
    // The install whose settings name `later` (not created yet) says so, on its own key only.
    const c = objectsToPolicy(objects, { ...options, api: 'later' });
    expect(reasonsOf(c.refusals)).toEqual(['billing/later ApiNotFound']);
    expect(c.others).toEqual(['billing/billing-api', 'payments/payments-api']);
    // An install whose settings name none is alone by its own word: the missing API is its to report.
    const alone = objectsToPolicy([...honest, missing], options);
    expect(reasonsOf(alone.refusals)).toEqual(['billing/later ApiNotFound']);
    expect(alone.others).toEqual([]);
  });

  it('refuses every key, ApiNotServed, when its settings name no ClusterKeyApi and several exist', () => {
    const built = objectsToPolicy([...honest, globex, billingGlobex], options);
    expect(built.document).toBeUndefined();
    expect(reasonsOf(built.refusals)).toEqual([
      'billing/billing-api ApiNotServed',
      'payments/payments-api ApiNotServed',
      'billing/globex-api ApiNotServed',
    ]);
    expect(built.refusals[0]?.message).toContain('keyApi');
  });
});

describe('two keyroll installs: copycat checks across installs', () => {
  it("an id of another API server is another key: one install's never makes the other's a copycat, either way", () => {
    // B's newer key copies A's id; A's newer key copies the id of B's older one.
    const bOlder = globexKey('billing', 'globex-first', {
      id: 'key_shared_name',
      destinations: [vaultDestination('teams/billing/globex-first')],
    });
    const aNewer = rotatedKey('billing', 'acme-second', {
      id: 'key_shared_name',
      organization: 'org_billing',
      destinations: [vaultDestination('teams/billing/acme-second')],
    });
    const bNewer = globexKey('billing', 'globex-copy', {
      id: 'key_billing',
      destinations: [vaultDestination('teams/billing/globex-copy')],
    });
    const objects = [...honest, globex, bOlder, aNewer, bNewer];
    const a = objectsToPolicy(objects, A);
    expect(a.refusals).toEqual([]);
    expect(a.keys.get('billing/billing-api')).toBe('key_billing');
    expect(a.keys.get('billing/acme-second')).toBe('key_shared_name');
    const b = objectsToPolicy(objects, B);
    expect(b.refusals).toEqual([]);
    expect(b.keys.get('billing/globex-first')).toBe('key_shared_name');
    expect(b.keys.get('billing/globex-copy')).toBe('key_billing');
  });

  it("a newer key of another install never takes an older key's path: ours kept, theirs refused by its own install", () => {
    const copy = globexKey('billing', 'globex-path', {
      id: 'key_globex_path',
      destinations: [vaultDestination('teams/billing/api-key')],
    });
    const objects = [...honest, globex, copy];
    const a = objectsToPolicy(objects, A);
    expect(a.refusals).toEqual([]);
    expect(a.keys.get('billing/billing-api')).toBe('key_billing');
    const b = objectsToPolicy(objects, B);
    expect(reasonsOf(b.refusals)).toEqual(['billing/globex-path PathInUse']);
    expect(b.refusals[0]?.message).toBe(
      'RotatedKey billing/billing-api of another keyroll install already writes teams/billing/api-key in clusterkeystore.vault',
    );
    expect(b.keys.size).toBe(0);
  });

  it('a path an older key of another install writes is refused to ours (both would write one secret), never to theirs', () => {
    // The hostile tenant's way around PathInUse: through a second install whose API admits it,
    // into the path a shared store lets both teams write.
    const theirs = globexKey('evil', 'globex-token', {
      id: 'key_evil_token',
      organization: 'org_evil',
      destinations: [vaultDestination('shared/token', 'shared')],
    });
    const ours = rotatedKey('billing', 'billing-token', {
      id: 'key_billing_token',
      organization: 'org_billing',
      destinations: [vaultDestination('shared/token', 'shared')],
    });
    const objects = [...honest, globex, theirs, ours];
    const a = objectsToPolicy(objects, A);
    expect(reasonsOf(a.refusals)).toEqual(['billing/billing-token PathInUse']);
    expect(a.refusals[0]?.message).toBe(
      'an older RotatedKey of another keyroll install already writes shared/token in clusterkeystore.shared',
    );
    expectKept(a.keys);
    const b = objectsToPolicy(objects, B);
    expect(b.refusals).toEqual([]);
    expect(b.keys.get('evil/globex-token')).toBe('key_evil_token');
  });

  it('an id on the same API server is the same key: a newer key of another install copying it is refused by that install', () => {
    const sameServer = otherApi('globex', api.kind === 'ClusterKeyApi' ? `${api.spec.baseUrl}/` : '');
    const copy = globexKey('billing', 'same-server-copy', {
      id: 'key_billing',
      destinations: [vaultDestination('teams/billing/same-server-copy')],
    });
    const objects = [...honest, sameServer, copy];
    const a = objectsToPolicy(objects, A);
    expect(a.refusals).toEqual([]);
    expectKept(a.keys);
    const b = objectsToPolicy(objects, B);
    expect(reasonsOf(b.refusals)).toEqual(['billing/same-server-copy KeyIdInUse']);
    expect(b.refusals[0]?.message).toBe(
      'RotatedKey billing/billing-api of another keyroll install already rotates key_billing',
    );
  });
});

function expectKept(keys: Map<string, string>): void {
  expect(keys.get('billing/billing-api')).toBe('key_billing');
  expect(keys.get('payments/payments-api')).toBe('key_payments');
}
