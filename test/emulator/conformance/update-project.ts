// Spec statements about "Update project".
import { expect } from 'vitest';
import { MAX_BODY_BYTES } from '../../../src/emulator/server.ts';
import { MEMBER, OWNER, dataOf, expectError } from '../support.ts';
import type { SpecStatement } from './statement.ts';

export const updateProjectStatements: SpecStatement[] = [
  {
    statement: 'update project: 200 returns the Project; updating projectName regenerates the slug',
    async check({ api }) {
      const project = dataOf<Record<string, unknown>>(
        await api.updateProject('prj_demo_mobile', OWNER, { projectName: 'Mobile Apps (iOS & Android)' }),
      );
      expect(project).toMatchObject({
        projectId: 'prj_demo_mobile',
        projectName: 'Mobile Apps (iOS & Android)',
        projectSlug: 'mobile-apps-ios-android',
      });
      const listed = dataOf<{ projectId: string; projectSlug: string }[]>(
        await api.list('?limit=100&organizationId=org_demo_acme', OWNER),
      );
      expect(listed.find((p) => p.projectId === 'prj_demo_mobile')?.projectSlug).toBe(
        'mobile-apps-ios-android',
      );
    },
  },
  {
    statement:
      'update project: description alone changes the description (string or null) and keeps the slug',
    async check({ api }) {
      const set = dataOf<Record<string, unknown>>(
        await api.updateProject('prj_demo_mobile', OWNER, { description: 'Native clients' }),
      );
      expect(set).toMatchObject({ description: 'Native clients', projectSlug: 'mobile-app' });
      const cleared = dataOf<Record<string, unknown>>(
        await api.updateProject('prj_demo_mobile', OWNER, { description: null }),
      );
      expect(cleared).toMatchObject({ description: null, projectSlug: 'mobile-app' });
    },
  },
  {
    statement: "update project: an organization API key may update its own organization's projects",
    async check({ emu, api }) {
      const answer = await api.updateProject('prj_demo_shop', emu.state.currentSecret('key_demo_shop'), {
        projectName: 'Shop Two',
      });
      expect(dataOf<Record<string, unknown>>(answer)).toMatchObject({ projectSlug: 'shop-two' });
    },
  },
  {
    statement: 'update project: PUT is accepted as well as PATCH',
    async check({ api }) {
      expect(
        (await api.updateProject('prj_demo_mobile', OWNER, { description: 'via put' }, 'PUT')).status,
      ).toBe(200);
    },
  },
  {
    statement:
      'update project: 400 for an invalid payload (unknown field, wrong type, empty object, no body, bad JSON, a name without letters)',
    async check({ emu, api }) {
      expectError(
        await api.updateProject('prj_demo_mobile', OWNER, { projectname: 'typo' }),
        400,
        'INVALID_PAYLOAD',
      );
      expectError(
        await api.updateProject('prj_demo_mobile', OWNER, { projectName: 42 }),
        400,
        'INVALID_PAYLOAD',
      );
      expectError(await api.updateProject('prj_demo_mobile', OWNER, {}), 400, 'INVALID_PAYLOAD');
      expectError(
        await api.updateProject('prj_demo_mobile', OWNER, { projectName: '!!!' }),
        400,
        'INVALID_PAYLOAD',
      );
      expectError(
        await api.call('PATCH', '/v1/projects/prj_demo_mobile', { token: OWNER }),
        400,
        'INVALID_PAYLOAD',
      );
      expectError(
        await api.call('PATCH', '/v1/projects/prj_demo_mobile', {
          token: OWNER,
          rawBody: '{"projectName":',
          headers: { 'content-type': 'application/json' },
        }),
        400,
        'INVALID_PAYLOAD',
      );
      expect(emu.state.project('prj_demo_mobile')).toMatchObject({ name: 'Mobile App', slug: 'mobile-app' });
    },
  },
  {
    statement: 'update project: 401 when authentication is missing or invalid',
    async check({ api }) {
      expectError(
        await api.updateProject('prj_demo_mobile', undefined, { description: 'x' }),
        401,
        'UNAUTHORIZED',
      );
      expectError(
        await api.updateProject('prj_demo_mobile', 'nope-nope-nope', { description: 'x' }),
        401,
        'UNAUTHORIZED',
      );
    },
  },
  {
    statement: 'update project: 403 when the principal cannot change the project (member role)',
    async check({ emu, api }) {
      expectError(await api.updateProject('prj_demo_mobile', MEMBER, { description: 'x' }), 403, 'FORBIDDEN');
      expect(emu.state.project('prj_demo_mobile').description).toBe('iOS and Android clients');
    },
  },
  {
    statement:
      'update project: 404 for an unknown project, and for a project of an organization the caller cannot see',
    async check({ emu, api }) {
      expectError(await api.updateProject('prj_nope', OWNER, { description: 'x' }), 404, 'NOT_FOUND');
      expectError(
        await api.updateProject('prj_demo_mobile', emu.state.currentSecret('key_demo_shop'), {
          description: 'x',
        }),
        404,
        'NOT_FOUND',
      );
    },
  },
  {
    statement:
      'update project: 409 CONFLICT when the new slug is taken by another project of the organization',
    async check({ emu, api }) {
      const answer = await api.updateProject('prj_demo_mobile', OWNER, { projectName: 'ANALYTICS' });
      expectError(answer, 409, 'CONFLICT');
      expect(emu.state.project('prj_demo_mobile').name).toBe('Mobile App');
      // The same name in another organization is no conflict.
      expect((await api.updateProject('prj_demo_shop', OWNER, { projectName: 'Analytics' })).status).toBe(
        200,
      );
    },
  },
  {
    statement: 'update project: 413 PAYLOAD_TOO_LARGE for a body over 1 MB; a body of exactly 1 MB is read',
    async check({ api }) {
      const over = JSON.stringify({ description: 'x'.repeat(MAX_BODY_BYTES) });
      expectError(
        await api.call('PATCH', '/v1/projects/prj_demo_mobile', {
          token: OWNER,
          rawBody: over,
          headers: { 'content-type': 'application/json' },
        }),
        413,
        'PAYLOAD_TOO_LARGE',
      );
      const exact = JSON.stringify({ description: 'x'.repeat(MAX_BODY_BYTES - '{"description":""}'.length) });
      expect(Buffer.byteLength(exact)).toBe(MAX_BODY_BYTES);
      // Read and judged on its content (too long a description), not refused for its size.
      expectError(
        await api.call('PATCH', '/v1/projects/prj_demo_mobile', {
          token: OWNER,
          rawBody: exact,
          headers: { 'content-type': 'application/json' },
        }),
        400,
        'INVALID_PAYLOAD',
      );
    },
  },
  {
    statement: 'update project: 429 RATE_LIMITED with Retry-After for an API key over its rate',
    async check({ emu, api }) {
      const { secret } = emu.state.addApiKey({
        name: 'slow',
        organizationId: 'org_demo_acme',
        rateLimitPerMinute: 1,
      });
      expect((await api.updateProject('prj_demo_mobile', secret, { description: 'one' })).status).toBe(200);
      const refused = await api.updateProject('prj_demo_mobile', secret, { description: 'two' });
      expectError(refused, 429, 'RATE_LIMITED');
      expect(refused.headers['retry-after']).toBe('60');
      expect(emu.state.project('prj_demo_mobile').description).toBe('one');
    },
  },
  {
    statement: 'update project: 500 INTERNAL_ERROR in the envelope (injected; not applied)',
    async check({ emu, api }) {
      emu.faults.inject('updateProject', { kind: 'status', status: 500 });
      expectError(
        await api.updateProject('prj_demo_mobile', OWNER, { description: 'x' }),
        500,
        'INTERNAL_ERROR',
      );
      expect(emu.state.project('prj_demo_mobile').description).toBe('iOS and Android clients');
    },
  },
];
