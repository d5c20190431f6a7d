// Spec statements about "List projects" and the Project and Pagination tables.
import { expect } from 'vitest';
import { ADMIN, MEMBER, OWNER, burst, dataOf, expectError, type Answer } from '../support.ts';
import type { SpecStatement } from './statement.ts';

interface Page {
  data: { projectId: string; organizationId: string }[];
  pagination: { nextCursor: string | null; hasMore: boolean };
}

function pageOf(answer: Answer): Page {
  expect(answer.status).toBe(200);
  return answer.body as Page;
}

export const listStatements: SpecStatement[] = [
  {
    statement: 'list: 200 gives success, data (Projects with every required field) and pagination',
    async check({ api }) {
      const answer = await api.list('?limit=100&organizationId=org_demo_acme', OWNER);
      const body = answer.body as { success: boolean; data: Record<string, unknown>[]; pagination: unknown };
      expect(body.success).toBe(true);
      expect(body.pagination).toEqual({ nextCursor: null, hasMore: false });
      const storefront = body.data.find((p) => p.projectId === 'prj_demo_storefront');
      expect(storefront).toEqual({
        projectId: 'prj_demo_storefront',
        projectSlug: 'storefront',
        projectName: 'Storefront',
        description: 'Public web shop',
        organizationId: 'org_demo_acme',
        organizationSlug: 'acme',
        dashboardURL: expect.stringMatching(/^https:\/\//) as unknown,
        products: {
          consent: {
            instanceId: 'cns_demo_storefront',
            instanceSlug: 'storefront-consent',
            instanceName: 'Storefront consent',
          },
        },
      });
      expect(() => new URL(String(storefront?.dashboardURL))).not.toThrow();
      expect(body.data.find((p) => p.projectId === 'prj_demo_analytics')).toMatchObject({
        description: null,
        products: { consent: null },
      });
    },
  },
  {
    statement: 'list: results are the projects of the authenticated principal',
    async check({ emu, api }) {
      const byKey = pageOf(await api.list('?limit=100', emu.state.currentSecret('key_demo_shop')));
      expect(byKey.data.map((p) => p.projectId)).toEqual(['prj_demo_shop']);
      const byAdmin = pageOf(await api.list('?limit=100', ADMIN));
      expect(new Set(byAdmin.data.map((p) => p.organizationId))).toEqual(new Set(['org_demo_acme']));
      const byOwner = pageOf(await api.list('?limit=100', OWNER));
      expect(byOwner.data).toHaveLength(6);
    },
  },
  {
    statement: 'list: organizationId restricts results to one organization the caller can access',
    async check({ api }) {
      const page = pageOf(await api.list('?limit=100&organizationId=org_demo_starter', OWNER));
      expect(page.data.map((p) => p.projectId)).toEqual(['prj_demo_shop']);
    },
  },
  {
    statement: 'list: cursor paging walks every project exactly once over more than one page',
    async check({ emu, api }) {
      for (let i = 0; i < 245; i += 1) {
        emu.state.addProject({
          id: `prj_bulk_${String(i).padStart(3, '0')}`,
          name: `Bulk ${i}`,
          organizationId: 'org_demo_acme',
        });
      }
      const seen: string[] = [];
      let query = '?limit=100&organizationId=org_demo_acme';
      const pageSizes: number[] = [];
      for (;;) {
        const page = pageOf(await api.list(query, OWNER));
        pageSizes.push(page.data.length);
        seen.push(...page.data.map((p) => p.projectId));
        expect(page.pagination.hasMore).toBe(page.pagination.nextCursor !== null);
        if (page.pagination.nextCursor === null) break;
        query = `?limit=100&organizationId=org_demo_acme&cursor=${encodeURIComponent(page.pagination.nextCursor)}`;
      }
      expect(pageSizes).toEqual([100, 100, 49]);
      expect(new Set(seen).size).toBe(249);
    },
  },
  {
    statement: 'list: limit=1 pages one project at a time with opaque cursors',
    async check({ api }) {
      const first = pageOf(await api.list('?limit=1&organizationId=org_demo_starter', OWNER));
      expect(first.pagination).toEqual({ nextCursor: null, hasMore: false });
      const acme1 = pageOf(await api.list('?limit=1&organizationId=org_demo_acme', OWNER));
      expect(acme1.pagination.hasMore).toBe(true);
      expect(acme1.pagination.nextCursor).not.toContain('prj_');
      const acme2 = pageOf(
        await api.list(
          `?limit=1&organizationId=org_demo_acme&cursor=${encodeURIComponent(acme1.pagination.nextCursor ?? '')}`,
          OWNER,
        ),
      );
      expect(acme2.data[0]?.projectId).not.toBe(acme1.data[0]?.projectId);
    },
  },
  {
    statement: 'list: limit is required and must be an integer from 1 to 100 (400 otherwise)',
    async check({ api }) {
      for (const bad of [
        '',
        '?limit=0',
        '?limit=101',
        '?limit=abc',
        '?limit=1.5',
        '?limit=-1',
        '?limit=1&limit=2',
      ]) {
        expectError(await api.list(bad, OWNER), 400, 'INVALID_PAYLOAD');
      }
      expect((await api.list('?limit=1', OWNER)).status).toBe(200);
      expect((await api.list('?limit=100', OWNER)).status).toBe(200);
    },
  },
  {
    statement: 'list: an invalid cursor is 400 (garbage, tampered, or issued for another query)',
    async check({ api }) {
      const page = pageOf(await api.list('?limit=1&organizationId=org_demo_acme', OWNER));
      const cursor = page.pagination.nextCursor ?? '';
      const tampered = `${cursor.slice(0, -1)}${cursor.endsWith('A') ? 'B' : 'A'}`;
      for (const bad of [
        'garbage',
        tampered,
        Buffer.from('{"after":"prj_demo_analytics"}').toString('base64url'),
      ]) {
        expectError(
          await api.list(`?limit=1&organizationId=org_demo_acme&cursor=${encodeURIComponent(bad)}`, OWNER),
          400,
          'INVALID_PAYLOAD',
        );
      }
      expectError(
        await api.list(`?limit=1&cursor=${encodeURIComponent(cursor)}`, OWNER),
        400,
        'INVALID_PAYLOAD',
      );
    },
  },
  {
    statement: 'list: 401 when authentication is missing or invalid',
    async check({ api }) {
      expectError(await api.list('?limit=1', undefined), 401, 'UNAUTHORIZED');
      expectError(await api.list('?limit=1', 'kmk_live_forged'), 401, 'UNAUTHORIZED');
      expectError(
        await api.call('GET', '/v1/projects?limit=1', { headers: { authorization: 'Basic Zm9vOmJhcg==' } }),
        401,
        'UNAUTHORIZED',
      );
    },
  },
  {
    statement: 'list: 402 for an API key of an organization below Starter, or downgraded',
    async check({ emu, api }) {
      expectError(
        await api.list('?limit=1', emu.state.currentSecret('key_demo_hobby')),
        402,
        'PLAN_REQUIRED',
      );
      expectError(
        await api.list('?limit=1', emu.state.currentSecret('key_demo_lapsed')),
        402,
        'PLAN_REQUIRED',
      );
      emu.state.setDowngraded('org_demo_lapsed', false);
      expect((await api.list('?limit=1', emu.state.currentSecret('key_demo_lapsed'))).status).toBe(200);
      // The plan rule is about API keys: an OAuth principal still lists the free organization's projects.
      expect((await api.list('?limit=1&organizationId=org_demo_hobby', OWNER)).status).toBe(200);
    },
  },
  {
    statement: 'list: 403 for an organizationId the caller cannot access',
    async check({ emu, api }) {
      expectError(
        await api.list(
          '?limit=1&organizationId=org_demo_starter',
          emu.state.currentSecret('key_demo_billing'),
        ),
        403,
        'FORBIDDEN',
      );
      expectError(await api.list('?limit=1&organizationId=org_demo_starter', MEMBER), 403, 'FORBIDDEN');
      expectError(await api.list('?limit=1&organizationId=org_unknown', OWNER), 403, 'FORBIDDEN');
    },
  },
  {
    statement:
      'list: an API key on Starter gets 600 calls per minute, then 429 with Retry-After until the window resets',
    async check({ emu, api, clock }) {
      const secret = emu.state.currentSecret('key_demo_shop');
      clock.advance(20_000);
      const statuses = await burst(600, () => api.list('?limit=1', secret));
      expect(statuses.every((s) => s === 200)).toBe(true);
      const refused = await api.list('?limit=1', secret);
      expectError(refused, 429, 'RATE_LIMITED');
      expect(refused.headers['retry-after']).toBe('40');
      clock.advance(40_000);
      expect((await api.list('?limit=1', secret)).status).toBe(200);
    },
  },
  {
    statement: 'list: an API key on Pro gets 1500 calls per minute and on Enterprise 3000',
    async check({ emu, api }) {
      emu.state.setPlan('org_demo_lapsed', 'pro');
      emu.state.setDowngraded('org_demo_lapsed', false);
      const pro = emu.state.addApiKey({ name: 'pro', organizationId: 'org_demo_lapsed' });
      const enterprise = emu.state.addApiKey({ name: 'ent', organizationId: 'org_demo_acme' });
      const proStatuses = await burst(1501, () => api.list('?limit=1', pro.secret), 100);
      expect(proStatuses.filter((s) => s === 200)).toHaveLength(1500);
      const entStatuses = await burst(3001, () => api.list('?limit=1', enterprise.secret), 100);
      expect(entStatuses.filter((s) => s === 200)).toHaveLength(3000);
      expect(entStatuses.filter((s) => s === 429)).toHaveLength(1);
    },
  },
  {
    statement: 'list: 500 INTERNAL_ERROR in the envelope (injected)',
    async check({ emu, api }) {
      emu.faults.inject('listProjects', { kind: 'status', status: 500 });
      expectError(await api.list('?limit=1', OWNER), 500, 'INTERNAL_ERROR');
      expect(dataOf<unknown[]>(await api.list('?limit=1', OWNER))).toHaveLength(1);
    },
  },
];
