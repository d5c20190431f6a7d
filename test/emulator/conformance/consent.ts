// Spec statements about "Update project consent settings" and the consent settings table.
import { expect } from 'vitest';
import { MAX_BODY_BYTES } from '../../../src/emulator/server.ts';
import { MEMBER, OWNER, dataOf, errorOf, expectError } from '../support.ts';
import type { SpecStatement } from './statement.ts';

const REFUSED_ORIGINS = [
  'example.com', // no scheme
  'https://example.com/', // trailing slash
  'https://example.com/path',
  'https://example.com?q=1',
  'ftp://example.com',
  'https://Example.com', // not canonical (uppercase)
  'https://example.com:443', // default port spelled out
  'https://user@example.com',
  '*.com', // a wildcard needs a domain of two labels or more
  '*.',
  '**.example.com',
  '*example.com',
  'https://*.example.com', // the wildcard form has no scheme
  '*.example.com/path',
  '*.-bad-.example.com',
  '*.10.0.0.1',
  '',
];

export const consentStatements: SpecStatement[] = [
  {
    statement: 'consent: 200 returns the consent instance settings with every required field',
    async check({ api }) {
      const data = dataOf<Record<string, unknown>>(
        await api.updateConsent('prj_demo_storefront', OWNER, { branding: 'brand_b' }),
      );
      expect(data).toEqual({
        instanceId: 'cns_demo_storefront',
        instanceSlug: 'storefront-consent',
        instanceName: 'Storefront consent',
        trustedOrigins: ['https://shop.acme.example', '*.acme.example'],
        branding: 'brand_b',
        backendURL: 'https://consent-backend.acme.example',
        backendVersion: '2.4.1',
        dashboardURL: expect.stringMatching(/^https:\/\//) as unknown,
      });
    },
  },
  {
    statement:
      'consent: trustedOrigins accepts exact origins, the single wildcard "*", and "*." followed by a domain',
    async check({ emu, api }) {
      const origins = [
        'https://app.example.com',
        'http://localhost:3000',
        'http://127.0.0.1:8080',
        '*',
        '*.example.com',
        '*.eu.example.co.uk',
      ];
      const data = dataOf<{ trustedOrigins: string[] }>(
        await api.updateConsent('prj_demo_storefront', OWNER, { trustedOrigins: origins }),
      );
      expect(data.trustedOrigins).toEqual(origins);
      expect(emu.state.consentInstances.get('cns_demo_storefront')?.trustedOrigins).toEqual(origins);
    },
  },
  {
    statement:
      'consent: any other origin pattern is 400 INVALID_ORIGIN naming its index, and nothing changes',
    async check({ emu, api }) {
      for (const origin of REFUSED_ORIGINS) {
        const answer = await api.updateConsent('prj_demo_storefront', OWNER, {
          trustedOrigins: ['https://ok.example', origin],
        });
        expectError(answer, 400, 'INVALID_ORIGIN');
        expect({ origin, details: errorOf(answer).details }).toMatchObject({ origin, details: { index: 1 } });
      }
      expect(emu.state.consentInstances.get('cns_demo_storefront')?.trustedOrigins).toEqual([
        'https://shop.acme.example',
        '*.acme.example',
      ]);
    },
  },
  {
    statement:
      'consent: branding none needs an eligible paid plan (Pro or Enterprise, not downgraded): 403 PLAN_REQUIRED otherwise',
    async check({ emu, api }) {
      emu.state.consentInstances.set('cns_starter', {
        id: 'cns_starter',
        slug: 'starter',
        name: 'Starter',
        trustedOrigins: [],
        branding: 'brand_a',
        backendURL: null,
        backendVersion: '1.0.0',
        locked: false,
      });
      emu.state.addProject({
        id: 'prj_starter_consent',
        name: 'Starter consent',
        organizationId: 'org_demo_starter',
        consentInstanceId: 'cns_starter',
      });
      expectError(
        await api.updateConsent('prj_starter_consent', OWNER, { branding: 'none' }),
        403,
        'PLAN_REQUIRED',
      );
      expect((await api.updateConsent('prj_starter_consent', OWNER, { branding: 'brand_b' })).status).toBe(
        200,
      );
      expect(
        dataOf<{ branding: string }>(
          await api.updateConsent('prj_demo_storefront', OWNER, { branding: 'none' }),
        ).branding,
      ).toBe('none');
      emu.state.setPlan('org_demo_acme', 'pro');
      emu.state.setDowngraded('org_demo_acme', true);
      expectError(
        await api.updateConsent('prj_demo_storefront', OWNER, { branding: 'none' }),
        403,
        'PLAN_REQUIRED',
      );
    },
  },
  {
    statement: 'consent: PUT is accepted as well as PATCH',
    async check({ api }) {
      expect(
        (await api.updateConsent('prj_demo_storefront', OWNER, { branding: 'brand_a' }, 'PUT')).status,
      ).toBe(200);
    },
  },
  {
    statement:
      'consent: 400 for an invalid payload (unknown branding, unknown field, empty object, non-array origins)',
    async check({ api }) {
      for (const body of [{ branding: 'brand_c' }, { brandng: 'none' }, {}, { trustedOrigins: '*' }]) {
        expectError(await api.updateConsent('prj_demo_storefront', OWNER, body), 400, 'INVALID_PAYLOAD');
      }
    },
  },
  {
    statement: 'consent: 401 when authentication is missing',
    async check({ api }) {
      expectError(
        await api.updateConsent('prj_demo_storefront', undefined, { branding: 'brand_a' }),
        401,
        'UNAUTHORIZED',
      );
    },
  },
  {
    statement: 'consent: 403 when the principal cannot change the project (member role)',
    async check({ api }) {
      expectError(
        await api.updateConsent('prj_demo_storefront', MEMBER, { branding: 'brand_b' }),
        403,
        'FORBIDDEN',
      );
    },
  },
  {
    statement: 'consent: 404 for an unknown project, and for a project without a linked consent instance',
    async check({ api }) {
      expectError(await api.updateConsent('prj_nope', OWNER, { branding: 'brand_a' }), 404, 'NOT_FOUND');
      expectError(
        await api.updateConsent('prj_demo_analytics', OWNER, { branding: 'brand_a' }),
        404,
        'NOT_FOUND',
      );
    },
  },
  {
    statement: 'consent: 409 CONFLICT while the consent instance is locked by another change',
    async check({ api }) {
      expectError(
        await api.updateConsent('prj_demo_checkout', OWNER, { branding: 'brand_a' }),
        409,
        'CONFLICT',
      );
    },
  },
  {
    statement: 'consent: 413 PAYLOAD_TOO_LARGE for a body over 1 MB',
    async check({ api }) {
      const origins = Array.from({ length: 40_000 }, (_, i) => `https://host-${i}.example.com`);
      const body = JSON.stringify({ trustedOrigins: origins });
      expect(Buffer.byteLength(body)).toBeGreaterThan(MAX_BODY_BYTES);
      expectError(
        await api.updateConsent('prj_demo_storefront', OWNER, { trustedOrigins: origins }),
        413,
        'PAYLOAD_TOO_LARGE',
      );
    },
  },
  {
    statement: 'consent: 429 RATE_LIMITED with Retry-After for an API key over its rate',
    async check({ emu, api }) {
      const { secret } = emu.state.addApiKey({
        name: 'slow',
        organizationId: 'org_demo_acme',
        rateLimitPerMinute: 1,
      });
      expect((await api.updateConsent('prj_demo_storefront', secret, { branding: 'brand_b' })).status).toBe(
        200,
      );
      const refused = await api.updateConsent('prj_demo_storefront', secret, { branding: 'brand_a' });
      expectError(refused, 429, 'RATE_LIMITED');
      expect(refused.headers['retry-after']).toMatch(/^\d+$/);
    },
  },
  {
    statement: 'consent: 500 INTERNAL_ERROR in the envelope (injected; not applied)',
    async check({ emu, api }) {
      emu.faults.inject('updateConsent', { kind: 'status', status: 500 });
      expectError(
        await api.updateConsent('prj_demo_storefront', OWNER, { branding: 'brand_b' }),
        500,
        'INTERNAL_ERROR',
      );
      expect(emu.state.consentInstances.get('cns_demo_storefront')?.branding).toBe('brand_a');
    },
  },
];
