// Spec statements about "Roll API key".
import { expect } from 'vitest';
import type { EmulatorSeed } from '../../../src/emulator/seed.ts';
import { ADMIN, MEMBER, OWNER, dataOf, errorOf, expectError } from '../support.ts';
import type { SpecStatement } from './statement.ts';

const tinyRateSeed: EmulatorSeed = {
  organizations: [{ id: 'org_a', slug: 'a', name: 'A', plan: 'enterprise' }],
  principals: [
    {
      id: 'owner',
      name: 'Owner',
      kind: 'oauth',
      token: 'owner-token-a',
      memberships: [{ organizationId: 'org_a', role: 'owner' }],
    },
  ],
  // A key minted long ago at a tiny rate, to show behaviourally that a roll re-mints at the plan's rate.
  apiKeys: [{ id: 'key_tiny', name: 'tiny', organizationId: 'org_a', rateLimitPerMinute: 2 }],
};

export const rollStatements: SpecStatement[] = [
  {
    statement: 'roll: 200 returns success, data.key (the new secret) and data.keyId',
    async check({ emu, api }) {
      const answer = await api.roll('key_demo_billing', OWNER);
      expect(answer.body).toEqual({
        success: true,
        data: { key: emu.state.currentSecret('key_demo_billing'), keyId: 'key_demo_billing' },
      });
      expect(emu.state.rollCount('key_demo_billing')).toBe(1);
    },
  },
  {
    statement: 'roll: the key keeps its name and identity',
    async check({ emu, api }) {
      await api.roll('key_demo_billing', ADMIN);
      expect(emu.state.apiKey('key_demo_billing')).toMatchObject({
        id: 'key_demo_billing',
        name: 'billing-service',
        organizationId: 'org_demo_acme',
      });
    },
  },
  {
    statement: 'roll: the previous secret stops working immediately',
    async check({ emu, api }) {
      const old = emu.state.currentSecret('key_demo_search');
      expect((await api.list('?limit=1', old)).status).toBe(200);
      const fresh = dataOf<{ key: string }>(await api.roll('key_demo_search', OWNER)).key;
      expectError(await api.list('?limit=1', old), 401, 'UNAUTHORIZED');
      expect((await api.list('?limit=1', fresh)).status).toBe(200);
    },
  },
  {
    statement:
      'roll: the new secret is returned only once (every roll mints a different secret, no other answer carries it)',
    options: { faultInjection: true },
    async check({ emu, api }) {
      const first = dataOf<{ key: string }>(await api.roll('key_demo_ingest', OWNER)).key;
      const second = dataOf<{ key: string }>(await api.roll('key_demo_ingest', OWNER)).key;
      expect(second).not.toBe(first);
      expect(new Set(emu.state.mintedSecrets()).size).toBe(emu.state.mintedSecrets().length);
      const later = [
        await api.list('?limit=100', OWNER),
        await api.call('GET', '/_emulator/keys'),
        await api.call('GET', '/_emulator/keys/key_demo_ingest'),
      ];
      for (const answer of later) expect(answer.text).not.toContain(second);
    },
  },
  {
    statement: 'roll: the new secret is minted with the rate limit of the current plan tier',
    options: { seed: tinyRateSeed },
    async check({ emu, api }) {
      const old = emu.state.currentSecret('key_tiny');
      expect([
        (await api.list('?limit=1', old)).status,
        (await api.list('?limit=1', old)).status,
        (await api.list('?limit=1', old)).status,
      ]).toEqual([200, 200, 429]);
      const fresh = dataOf<{ key: string }>(await api.roll('key_tiny', 'owner-token-a')).key;
      expect(emu.state.apiKey('key_tiny').rateLimitPerMinute).toBe(3000);
      const statuses = await Promise.all(Array.from({ length: 5 }, () => api.list('?limit=1', fresh)));
      expect(statuses.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    },
  },
  {
    statement: 'roll: a plan change applies from the next roll (pro plan mints at 1500 per minute)',
    async check({ emu, api }) {
      emu.state.setPlan('org_demo_starter', 'pro');
      expect(emu.state.apiKey('key_demo_shop').rateLimitPerMinute).toBe(600);
      await api.roll('key_demo_shop', OWNER, '?organizationId=org_demo_starter');
      expect(emu.state.apiKey('key_demo_shop').rateLimitPerMinute).toBe(1500);
    },
  },
  {
    statement: 'roll: 400 when the key id or organizationId is not a valid identifier',
    async check({ emu, api }) {
      expectError(await api.roll('bad%20id', OWNER), 400, 'INVALID_PAYLOAD');
      expectError(
        await api.roll('key_demo_billing', OWNER, '?organizationId=%24%24'),
        400,
        'INVALID_PAYLOAD',
      );
      expect(emu.state.totalRolls()).toBe(0);
    },
  },
  {
    statement: 'roll: 401 when authentication is missing, invalid or expired',
    async check({ emu, api, clock }) {
      expectError(await api.roll('key_demo_billing', undefined), 401, 'UNAUTHORIZED');
      expectError(await api.roll('key_demo_billing', 'not-a-real-token'), 401, 'UNAUTHORIZED');
      const { token } = emu.state.issueAccessToken('usr_demo_owner', 60);
      expect((await api.roll('key_demo_billing', token)).status).toBe(200);
      clock.advance(60_000);
      expectError(await api.roll('key_demo_billing', token), 401, 'UNAUTHORIZED');
      expect(errorOf(await api.roll('key_demo_billing', token)).message).toMatch(/expired/);
    },
  },
  {
    statement: 'roll: 402 PLAN_REQUIRED for an organization below Starter',
    async check({ emu, api }) {
      const answer = await api.roll('key_demo_hobby', OWNER, '?organizationId=org_demo_hobby');
      expectError(answer, 402, 'PLAN_REQUIRED');
      expect(emu.state.rollCount('key_demo_hobby')).toBe(0);
    },
  },
  {
    statement: 'roll: 402 for a downgraded organization until its plan is restored',
    async check({ emu, api }) {
      expectError(
        await api.roll('key_demo_lapsed', OWNER, '?organizationId=org_demo_lapsed'),
        402,
        'PLAN_REQUIRED',
      );
      emu.state.setDowngraded('org_demo_lapsed', false);
      expect((await api.roll('key_demo_lapsed', OWNER, '?organizationId=org_demo_lapsed')).status).toBe(200);
    },
  },
  {
    statement: 'roll: 403 FORBIDDEN for an API key, which can never roll itself or any key',
    async check({ emu, api }) {
      const own = emu.state.currentSecret('key_demo_billing');
      expectError(await api.roll('key_demo_billing', own), 403, 'FORBIDDEN');
      expectError(await api.roll('key_demo_search', own), 403, 'FORBIDDEN');
      expect(emu.state.totalRolls()).toBe(0);
      expect(emu.state.isLiveSecret('key_demo_billing', own)).toBe(true);
    },
  },
  {
    statement: 'roll: 403 unless the principal is owner or admin of the organization',
    async check({ emu, api }) {
      expectError(await api.roll('key_demo_billing', MEMBER), 403, 'FORBIDDEN');
      expectError(
        await api.roll('key_demo_shop', ADMIN, '?organizationId=org_demo_starter'),
        403,
        'FORBIDDEN',
      );
      expect(emu.state.totalRolls()).toBe(0);
    },
  },
  {
    statement: 'roll: 404 for an unknown key, and for a key of another organization',
    async check({ emu, api }) {
      expectError(await api.roll('key_does_not_exist', OWNER), 404, 'NOT_FOUND');
      // key_demo_shop belongs to org_demo_starter; the owner's active organization is org_demo_acme.
      expectError(await api.roll('key_demo_shop', OWNER), 404, 'NOT_FOUND');
      expect(emu.state.totalRolls()).toBe(0);
    },
  },
  {
    statement: 'roll: organizationId selects the organization; it defaults to the active one',
    async check({ emu, api }) {
      expect((await api.roll('key_demo_shop', OWNER, '?organizationId=org_demo_starter')).status).toBe(200);
      expect((await api.roll('key_demo_billing', OWNER)).status).toBe(200);
      expect(emu.state.totalRolls()).toBe(2);
    },
  },
  {
    statement: 'roll: 429 RATE_LIMITED with Retry-After, and the key is not rolled',
    options: { rollRateLimitPerMinute: 2 },
    async check({ emu, api, clock }) {
      clock.advance(15_000);
      expect((await api.roll('key_demo_billing', OWNER)).status).toBe(200);
      expect((await api.roll('key_demo_billing', OWNER)).status).toBe(200);
      const refused = await api.roll('key_demo_billing', OWNER);
      expectError(refused, 429, 'RATE_LIMITED');
      expect(refused.headers['retry-after']).toBe('45');
      expect(emu.state.rollCount('key_demo_billing')).toBe(2);
      clock.advance(45_000);
      expect((await api.roll('key_demo_billing', OWNER)).status).toBe(200);
    },
  },
  {
    statement: 'roll: 500 INTERNAL_ERROR in the envelope (injected; not applied)',
    async check({ emu, api }) {
      emu.faults.inject('roll', { kind: 'status', status: 500 });
      expectError(await api.roll('key_demo_billing', OWNER), 500, 'INTERNAL_ERROR');
      expect(emu.state.rollCount('key_demo_billing')).toBe(0);
    },
  },
];
