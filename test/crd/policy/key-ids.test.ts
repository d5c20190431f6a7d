// The key-id gap (issue 31): the API's roll names a key by id with `organizationId` beside it, and
// the spec does not say the API refuses an id outside that organization; keyroll cannot list an
// organization's keys. So a namespace admitted for one organization could name a key id it has
// never seen claimed, of another organization keyroll's credential reaches. A ClusterKeyApi
// condition's `keyIds` (exact ids or `prefix*`) closes it: every id a key rolls must be listed.
import { afterEach, describe, expect, it } from 'vitest';
import { ApiCondition } from '../../../src/crd/kinds/key-api.ts';
import type { KeyrollObject } from '../../../src/crd/kinds/kinds.ts';
import { objectsToPolicy } from '../../../src/crd/policy/objects-to-policy.ts';
import { keyIdAdmitted } from '../../../src/crd/policy/tenancy.ts';
import { runRotations } from '../../../src/rotation/run.ts';
import { keyPolicy, startBench, type Bench } from '../../rotation/harness.ts';
import { api, object, options, paymentsKey, rotatedKey, vault, vaultDestination } from './fixtures.ts';

/** One API for evil (org_evil, key ids key_evil_* and key_evil_legacy) and billing (org_billing, any id). */
const listed = object({
  ...api,
  spec: {
    ...(api.spec as Record<string, unknown>),
    conditions: [
      { namespaces: ['billing'], organizations: ['org_billing'] },
      { namespaces: ['payments'], organizations: ['org_payments'] },
      { namespaces: ['evil'], organizations: ['org_evil'], keyIds: ['key_evil_*', 'key_evil_legacy'] },
    ],
  },
});

const evilKey = (spec: Record<string, unknown>): KeyrollObject =>
  rotatedKey('evil', 'try', {
    organization: 'org_evil',
    destinations: [vaultDestination('teams/evil/x')],
    ...spec,
  });

function refusalOf(extra: KeyrollObject) {
  const result = objectsToPolicy([listed, vault, paymentsKey, extra], options);
  return {
    result,
    refusal: result.refusals.find((refusal) => refusal.object.name === 'try'),
  };
}

describe('ClusterKeyApi keyIds: which API key ids an admitted namespace may rotate', () => {
  it("refuses a key id outside the condition's keyIds, even of an organization the namespace is admitted for", () => {
    // key_billing is billing's key; evil names it under its own organization, which the API may
    // or may not check: keyroll never sends the roll.
    const { result, refusal } = refusalOf(evilKey({ id: 'key_billing' }));
    expect(refusal?.reason).toBe('KeyIdNotAdmitted');
    expect(refusal?.message).toContain('key id key_billing');
    expect(result.keys.has('evil/try')).toBe(false);
    expect(result.keys.get('payments/payments-api')).toBe('key_payments');
  });

  it('admits an id a prefix pattern or an exact id lists', () => {
    for (const id of ['key_evil_1', 'key_evil_legacy']) {
      const { result, refusal } = refusalOf(evilKey({ id }));
      expect(refusal).toBeUndefined();
      expect(result.keys.get('evil/try')).toBe(id);
    }
  });

  it('checks both slots of a slot entry (the ids rolled), not the entry name', () => {
    const pair = { consumerRefresh: '1h', id: 'evil-pair' };
    const admitted = refusalOf(evilKey({ ...pair, slots: ['key_evil_a', 'key_evil_b'] }));
    expect(admitted.refusal).toBeUndefined();
    const refused = refusalOf(evilKey({ ...pair, slots: ['key_evil_a', 'key_payments_b'] }));
    expect(refused.refusal?.reason).toBe('KeyIdNotAdmitted');
    expect(refused.refusal?.message).toContain('key_payments_b');
  });

  it('keeps the older reason when the organization itself is not admitted', () => {
    const { refusal } = refusalOf(evilKey({ id: 'key_evil_1', organization: 'org_billing' }));
    expect(refusal?.reason).toBe('OrganizationNotAdmitted');
  });

  it('admits every id of the organization where a condition has no keyIds (as before)', () => {
    const billing = rotatedKey('billing', 'try', {
      id: 'anything_at_all',
      organization: 'org_billing',
      destinations: [vaultDestination('teams/billing/x')],
    });
    expect(refusalOf(billing).refusal).toBeUndefined();
  });

  it('matches a prefix only with at least one character after it, and exact ids exactly', () => {
    expect(keyIdAdmitted(undefined, 'anything')).toBe(true);
    expect(keyIdAdmitted(['key_evil_*'], 'key_evil_x')).toBe(true);
    expect(keyIdAdmitted(['key_evil_*'], 'key_evil_')).toBe(false);
    expect(keyIdAdmitted(['key_evil_*'], 'key_evilx')).toBe(false);
    expect(keyIdAdmitted(['key_evil'], 'key_evil_x')).toBe(false);
    expect(keyIdAdmitted(['key_evil'], 'key_evil')).toBe(true);
  });

  it('refuses a pattern with "*" anywhere but the end, a lone "*", and an empty list', () => {
    const condition = (keyIds: unknown) =>
      ApiCondition.safeParse({ namespaces: ['evil'], organizations: ['org_evil'], keyIds });
    expect(condition(['key_evil_*']).success).toBe(true);
    for (const keyIds of [['*'], ['key_*_evil'], ['key evil'], ['key/evil*'], []])
      expect(condition(keyIds).success, JSON.stringify(keyIds)).toBe(false);
  });
});

describe("the roll names the key's organization (organizationId)", () => {
  let bench: Bench | undefined;
  afterEach(async () => {
    await bench?.close();
    bench = undefined;
  });

  it('sends organizationId on every roll: an API that checks it refuses an id of another organization', async () => {
    // key_demo_billing is Acme's; the entry names it under Starter Shop, an organization the same
    // owner credential reaches. Without organizationId the emulator would take the caller's
    // active organization (Acme) and roll it; with it, the key is not found there.
    bench = await startBench({ keys: () => [keyPolicy('key_demo_billing', 'org_demo_starter')] });
    const sent: (string | undefined)[] = [];
    const runtime = await bench.runtime();
    const roll = runtime.api.rollKey.bind(runtime.api);
    runtime.api.rollKey = (keyId, rollOptions) => {
      sent.push(rollOptions?.organizationId);
      return roll(keyId, rollOptions);
    };
    try {
      const summary = await runRotations(runtime, {
        keys: bench.policy.keys,
        trigger: { reason: 'manual', force: true },
      });
      expect(summary.outcomes[0]).toMatchObject({ result: 'failed', step: 'roll' });
    } finally {
      await runtime.close();
    }
    expect(sent.length).toBeGreaterThan(0);
    expect(new Set(sent)).toEqual(new Set(['org_demo_starter']));
    expect(bench.emulator.state.rollCount('key_demo_billing')).toBe(0);
  });
});
