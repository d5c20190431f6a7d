// A hostile tenant (namespace evil) tries each way around the tenancy rules of docs/crds.md. Each
// try is refused with its reason, and billing's and payments' keys stay in the document: one
// tenant never stops another's rotations.
import { describe, expect, it } from 'vitest';
import type { KeyrollObject } from '../../../src/crd/kinds/kinds.ts';
import { objectsToPolicy } from '../../../src/crd/policy/objects-to-policy.ts';
import type { RefusalReason } from '../../../src/crd/policy/refusal.ts';
import { api, honest, object, options, rotatedKey, vaultDestination } from './fixtures.ts';

const evilKey = (spec: Record<string, unknown>, name = 'try'): KeyrollObject =>
  rotatedKey('evil', name, {
    id: `key_evil_${name}`,
    organization: 'org_evil',
    destinations: [vaultDestination('teams/evil/x')],
    ...spec,
  });

/** The objects with the honest teams', built; the refusals of `namespace/name`, and the honest keys kept. */
function tryWith(extra: readonly KeyrollObject[], refused = 'evil/try', opts = options) {
  const result = objectsToPolicy([...honest, ...extra], opts);
  const of = result.refusals.filter(
    (refusal) => `${refusal.object.namespace ?? ''}/${refusal.object.name}` === refused,
  );
  return {
    ...result,
    reasons: of.map((refusal) => refusal.reason),
    messages: of.map((refusal) => refusal.message),
  };
}

function expectHonestKept(keys: Map<string, string>): void {
  expect(keys.get('billing/billing-api')).toBe('key_billing');
  expect(keys.get('payments/payments-api')).toBe('key_payments');
}

describe('tenancy: a hostile tenant is refused, the others go on', () => {
  it("refuses a key of an organization no ClusterKeyApi condition admits the namespace for (another team's)", () => {
    const { reasons, keys, document } = tryWith([
      evilKey({ id: 'key_billing_2', organization: 'org_billing' }),
    ]);
    expect(reasons).toEqual(['OrganizationNotAdmitted']);
    expectHonestKept(keys);
    expect(document?.keys.map((key) => key.id)).not.toContain('key_billing_2');
  });

  it('refuses a ClusterKeyStore whose conditions do not admit the namespace', () => {
    const restricted = object({
      kind: 'ClusterKeyStore',
      metadata: { name: 'restricted' },
      spec: { kind: 'aws', region: 'eu-west-1', conditions: [{ namespaces: ['billing'] }] },
    });
    const { reasons, keys } = tryWith([
      restricted,
      evilKey({ destinations: [vaultDestination('evil/x', 'restricted')] }),
    ]);
    expect(reasons).toEqual(['StoreNotAdmitted']);
    expectHonestKept(keys);
  });

  const escapes: [string, string][] = [
    ["another team's prefix", 'teams/billing/api-key'],
    ['..', 'teams/evil/../billing/api-key'],
    ['.. past the root', '../../teams/billing/api-key'],
    ['a leading /', '/teams/billing/api-key'],
    ['percent-encoded ..', 'teams/evil/%2e%2e/billing/api-key'],
    ['percent-encoded /', 'teams/evil/..%2fbilling/api-key'],
    ['double-encoded ..', 'teams/evil/%252e%252E/billing/api-key'],
    ['a backslash', 'teams/evil/..\\billing/api-key'],
    ['a prefix that is a string prefix only', 'teams/evilx/api-key'],
    ['the prefix itself', 'teams/evil/'],
    ['a NUL byte', 'teams/evil/x%00/../../billing/api-key'],
    ['bad percent-encoding', 'teams/evil/%zz'],
  ];
  it.each(escapes)('refuses a destination path outside its pathPrefix: %s', (_, path) => {
    const { reasons, keys } = tryWith([evilKey({ destinations: [vaultDestination(path)] })]);
    expect(reasons).toEqual(['PathOutsidePrefix']);
    expectHonestKept(keys);
  });

  it('refuses a fallback path outside the prefix as it refuses a destination', () => {
    const { reasons } = tryWith([evilKey({ fallbacks: [vaultDestination('teams/billing/api-key')] })]);
    expect(reasons).toEqual(['PathOutsidePrefix']);
  });

  const unplain: [string, string][] = [
    ['//', 'teams//evil/x'],
    ['a leading /', '/teams/evil/x'],
    ['.', 'teams/evil/./x'],
    ['.. that stays inside', 'teams/evil/a/../x'],
    ['percent-encoding', 'teams/evil/%78'],
  ];
  it.each(unplain)('refuses a path under the prefix that is not written plainly: %s', (_, path) => {
    const { reasons, messages } = tryWith([evilKey({ destinations: [vaultDestination(path)] })]);
    expect(reasons).toEqual(['PathNotCanonical']);
    expect(messages[0]).toContain('teams/evil/');
  });

  it("refuses a KeyStore of another namespace: it is looked up in the key's own namespace only", () => {
    const billingStore = object({
      kind: 'KeyStore',
      metadata: { namespace: 'keyroll', name: 'platform-files' },
      spec: { kind: 'file', directory: '/var/lib/keyroll' },
    });
    const { reasons, keys } = tryWith([
      billingStore,
      evilKey({ destinations: [{ storeRef: { kind: 'KeyStore', name: 'platform-files' }, path: 'x' }] }),
    ]);
    expect(reasons).toEqual(['StoreNotFound']);
    expectHonestKept(keys);
  });

  it('refuses a consumer in another namespace, even when it got past the schema', () => {
    const key = evilKey({ consumers: [{ kind: 'deployment', name: 'own' }] });
    // The schema has no such field and the API server prunes it: an object from elsewhere may have it.
    const spec = key.spec as { consumers: Record<string, unknown>[] };
    spec.consumers.push({ kind: 'deployment', name: 'billing', namespace: 'billing' });
    const { reasons, keys, document } = tryWith([key]);
    expect(reasons).toEqual(['ConsumerOutsideNamespace']);
    expectHonestKept(keys);
    expect(JSON.stringify(document)).not.toContain('"own"');
  });

  it('refuses the later of two tenants writing one path of a shared ClusterKeyStore, keeps the earlier', () => {
    const first = rotatedKey('billing', 'shared-token', {
      id: 'key_billing_shared',
      organization: 'org_billing',
      destinations: [vaultDestination('shared/token', 'shared')],
    });
    const later = evilKey({ destinations: [vaultDestination('shared/token', 'shared')] });
    const { reasons, messages, keys } = tryWith([later, first]);
    expect(reasons).toEqual(['PathInUse']);
    // The message does not name the other team's object.
    expect(messages[0]).not.toContain('billing');
    expect(keys.get('billing/shared-token')).toBe('key_billing_shared');
    expectHonestKept(keys);
  });

  it('refuses the later of two objects naming one API key id of an organization both may use', () => {
    const first = rotatedKey('billing', 'shared-key', {
      id: 'key_shared',
      organization: 'org_shared',
      destinations: [vaultDestination('teams/billing/shared')],
    });
    const later = evilKey({ id: 'key_shared', organization: 'org_shared' });
    const asSlot = evilKey(
      {
        id: 'evil_pair',
        organization: 'org_shared',
        slots: ['key_evil_2', 'key_shared'],
        consumerRefresh: '1h',
        destinations: [vaultDestination('teams/evil/pair')],
      },
      'slot',
    );
    const result = tryWith([first, later, asSlot]);
    expect(result.reasons).toEqual(['KeyIdInUse']);
    expect(result.messages[0]).not.toContain('billing');
    expect(result.refusals.find((refusal) => refusal.object.name === 'slot')?.reason).toBe('KeyIdInUse');
    expect(result.keys.get('billing/shared-key')).toBe('key_shared');
    expectHonestKept(result.keys);
  });

  it('names the earlier object when both are in one namespace', () => {
    const first = rotatedKey('billing', 'a', {
      id: 'key_dup',
      organization: 'org_billing',
      destinations: [vaultDestination('teams/billing/a')],
    });
    const later = rotatedKey('billing', 'b', {
      id: 'key_dup',
      organization: 'org_billing',
      destinations: [vaultDestination('teams/billing/b')],
    });
    const { reasons, messages, keys } = tryWith([later, first], 'billing/b');
    expect(reasons).toEqual(['KeyIdInUse']);
    expect(messages[0]).toContain('RotatedKey billing/a');
    expect(keys.get('billing/a')).toBe('key_dup');
  });

  it('refuses the later key writing one secret through two stores that name the same server', () => {
    // A platform mistake: a second store on the same Vault admits evil under teams/. The policy's
    // own check (one secret, one key) still sees the two names as one place.
    const alias = object({
      kind: 'ClusterKeyStore',
      metadata: { name: 'vault-alias' },
      spec: {
        kind: 'vault',
        address: 'https://vault.example.com:8200',
        auth: { method: 'kubernetes', role: 'keyroll' },
        conditions: [{ namespaces: ['evil'], pathPrefix: 'teams/' }],
      },
    });
    const { reasons, keys, document } = tryWith([
      alias,
      evilKey({ destinations: [vaultDestination('teams/billing/api-key', 'vault-alias')] }),
    ]);
    expect(reasons).toEqual(['PolicyConflict']);
    expectHonestKept(keys);
    expect(keys.has('evil/try')).toBe(false);
    expect(document?.keys.map((key) => key.id)).toEqual(['key_billing', 'key_payments']);
  });

  it('refuses an apiRef or a storeRef to a missing object', () => {
    const noApi = tryWith([evilKey({ apiRef: { name: 'missing' } })]);
    expect(noApi.reasons).toEqual(['ApiNotFound']);
    expectHonestKept(noApi.keys);
    const noStore = tryWith([evilKey({ destinations: [vaultDestination('teams/evil/x', 'missing')] })]);
    expect(noStore.reasons).toEqual(['StoreNotFound']);
    expectHonestKept(noStore.keys);
  });

  it('leaves a key of a ClusterKeyApi this keyroll does not serve to the install serving it (installs.test.ts)', () => {
    const other = object({
      kind: 'ClusterKeyApi',
      metadata: { name: 'other' },
      spec: { ...(api.spec as Record<string, unknown>) },
    });
    const { reasons, keys, others } = tryWith([other, evilKey({ apiRef: { name: 'other' } })], 'evil/try', {
      ...options,
      api: 'acme',
    });
    expect(reasons).toEqual([]);
    expect(others).toEqual(['evil/try']);
    expect(keys.has('evil/try')).toBe(false);
    expectHonestKept(keys);
  });

  it("refuses a key the policy's own checks refuse (a sink that does not exist)", () => {
    const { reasons, messages, keys } = tryWith([evilKey({ notify: { onFailure: ['nowhere'] } })]);
    expect(reasons).toEqual(['InvalidSpec']);
    expect(messages[0]).toContain('nowhere');
    expectHonestKept(keys);
  });
});

describe("tenancy: a team's KeyStore may hold nothing keyroll would read or act with in its own pod", () => {
  const stores: [string, Record<string, unknown>, RefusalReason][] = [
    [
      'a file directory',
      { kind: 'file', directory: '/var/run/secrets/kubernetes.io/serviceaccount' },
      'KeyStoreLocalReference',
    ],
    [
      'a vault token reference',
      {
        kind: 'vault',
        address: 'https://vault.evil.example',
        auth: { method: 'token', token: 'env:ACME_TOKEN' },
      },
      'KeyStoreLocalReference',
    ],
    [
      'a vault approle secretId',
      {
        kind: 'vault',
        address: 'https://vault.evil.example',
        auth: { method: 'approle', roleId: 'r', secretId: 'file:/etc/keyroll/token' },
      },
      'KeyStoreLocalReference',
    ],
    [
      "vault's kubernetes login (keyroll's service-account token)",
      { kind: 'vault', address: 'https://vault.evil.example', auth: { method: 'kubernetes', role: 'r' } },
      'KeyStoreLocalReference',
    ],
    [
      'a caFile',
      {
        kind: 'vault',
        address: 'https://vault.evil.example',
        caFile: '/etc/keyroll/ca.pem',
        auth: { method: 'kubernetes', role: 'r' },
      },
      'KeyStoreLocalReference',
    ],
    ["aws with keyroll's identity", { kind: 'aws', region: 'eu-west-1' }, 'KeyStoreAmbientIdentity'],
  ];
  it.each(stores)('refuses a KeyStore with %s, and every key that names it', (_, spec, reason) => {
    const store = object({ kind: 'KeyStore', metadata: { namespace: 'evil', name: 'mine' }, spec });
    const key = evilKey({ destinations: [{ storeRef: { kind: 'KeyStore', name: 'mine' }, path: 'x' }] });
    const result = objectsToPolicy([...honest, store, key], options);
    expect(result.refusals.map((refusal) => [refusal.object.kind, refusal.reason])).toEqual([
      ['KeyStore', reason],
      ['RotatedKey', 'KeyStoreRefused'],
    ]);
    expect(Object.keys(result.document?.backends ?? {})).toEqual(['clusterkeystore.vault']);
    expectHonestKept(result.keys);
  });
});
