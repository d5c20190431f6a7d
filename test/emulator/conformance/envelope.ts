// Spec statements about the response envelope, the error codes and authentication in general.
import { expect } from 'vitest';
import { API_ERROR_CODES } from '../../../src/emulator/errors.ts';
import { expectNoSecrets } from '../../support/secret-scan.ts';
import { OWNER, expectError, type Answer } from '../support.ts';
import type { SpecStatement } from './statement.ts';

export const envelopeStatements: SpecStatement[] = [
  {
    statement:
      'envelope: every error body is {success:false, error:{code, message}} with a code from the spec list, for every status',
    async check({ emu, api }) {
      const answers: Answer[] = [
        await api.list('?limit=0', OWNER),
        await api.list('?limit=1', undefined),
        await api.list('?limit=1', emu.state.currentSecret('key_demo_hobby')),
        await api.roll('key_demo_billing', emu.state.currentSecret('key_demo_billing')),
        await api.roll('key_missing', OWNER),
        await api.updateConsent('prj_demo_checkout', OWNER, { branding: 'brand_a' }),
        await api.updateProject('prj_demo_mobile', OWNER, { description: 'x'.repeat(1_100_000) }),
      ];
      emu.faults.inject('listProjects', { kind: 'status', status: 429, retryAfter: '7' });
      emu.faults.inject('listProjects', { kind: 'status', status: 500 });
      emu.faults.inject('listProjects', { kind: 'status', status: 503 });
      answers.push(
        await api.list('?limit=1', OWNER),
        await api.list('?limit=1', OWNER),
        await api.list('?limit=1', OWNER),
      );
      expect(answers.map((a) => a.status)).toEqual([400, 401, 402, 403, 404, 409, 413, 429, 500, 503]);
      for (const answer of answers) {
        const body = answer.body as { success: unknown; error: { code: string; message: unknown } };
        expect(Object.keys(body).sort()).toEqual(['error', 'success']);
        expect(body.success).toBe(false);
        expect(API_ERROR_CODES).toContain(body.error.code);
        expect(typeof body.error.message).toBe('string');
      }
      expect(answers.map((a) => (a.body as { error: { code: string } }).error.code)).toEqual([
        'INVALID_PAYLOAD',
        'UNAUTHORIZED',
        'PLAN_REQUIRED',
        'FORBIDDEN',
        'NOT_FOUND',
        'CONFLICT',
        'PAYLOAD_TOO_LARGE',
        'RATE_LIMITED',
        'INTERNAL_ERROR',
        'SERVICE_UNAVAILABLE',
      ]);
      expect(answers[7]?.headers['retry-after']).toBe('7');
    },
  },
  {
    statement: 'envelope: every success body carries success:true',
    async check({ api }) {
      const answers = [
        await api.list('?limit=1', OWNER),
        await api.updateProject('prj_demo_mobile', OWNER, { description: 'd' }),
        await api.updateConsent('prj_demo_storefront', OWNER, { branding: 'brand_b' }),
        await api.roll('key_demo_billing', OWNER),
      ];
      for (const answer of answers) {
        expect(answer.status).toBe(200);
        expect((answer.body as { success: unknown }).success).toBe(true);
        expect(String(answer.headers['content-type'])).toMatch(/^application\/json/);
      }
    },
  },
  {
    statement: 'envelope: an unknown path under /v1 answers 404 NOT_FOUND in the envelope',
    async check({ api }) {
      expectError(await api.call('GET', '/v1/keys', { token: OWNER }), 404, 'NOT_FOUND');
      expectError(
        await api.call('DELETE', '/v1/projects/prj_demo_mobile', { token: OWNER }),
        404,
        'NOT_FOUND',
      );
    },
  },
  {
    statement:
      'authentication: an API key or an OAuth token may be the bearer; a rejected credential is never echoed',
    async check({ emu, api }) {
      expect((await api.list('?limit=1', emu.state.currentSecret('key_demo_billing'))).status).toBe(200);
      expect((await api.list('?limit=1', OWNER)).status).toBe(200);
      const revoked = emu.state.currentSecret('key_demo_search');
      emu.state.revokeKey('key_demo_search');
      const answer = await api.list('?limit=1', revoked);
      expectError(answer, 401, 'UNAUTHORIZED');
      expectNoSecrets([answer.text], [revoked]);
      expect(answer.text).not.toContain(revoked.slice(9));
    },
  },
  {
    statement: 'admin routes exist only when fault injection is enabled',
    async check({ api }) {
      expectError(await api.call('GET', '/_emulator/stats'), 404, 'NOT_FOUND');
    },
  },
];
