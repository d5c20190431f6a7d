// List, update and probe answers checked against the spec's tables, with MockAgent for the
// malformed shapes a conforming server never sends.
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/api/errors.ts';
import { RateLimiter } from '../../src/api/rate-limiter.ts';
import { Secret } from '../../src/audit/secret.ts';
import { consentSettings, fakeClock, JSON_HEADERS, mockApi, project } from './mock-api.ts';

function page(
  items: Record<string, unknown>[],
  nextCursor: string | null,
  hasMore: boolean,
): Record<string, unknown> {
  return { success: true, data: items, pagination: { nextCursor, hasMore } };
}

async function failure(promise: Promise<unknown>): Promise<ApiError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiError);
  return error as ApiError;
}

describe('ApiClient.listProjects', () => {
  it('GETs one page with limit, organization and cursor and returns projects and paging', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: '/v1/projects?organizationId=org_1&limit=2&cursor=c1', method: 'GET' })
      .reply(200, page([project(), project({ projectId: 'prj_2' })], 'c2', true), { headers: JSON_HEADERS });
    const result = await api.client.listProjects({ limit: 2, organizationId: 'org_1', cursor: 'c1' });
    expect(result.projects.map((p) => p.projectId)).toEqual(['prj_1', 'prj_2']);
    expect(result.nextCursor).toBe('c2');
    expect(result.hasMore).toBe(true);
    await api.done();
  });

  it('tolerates fields the spec does not list', async () => {
    const api = mockApi();
    api.pool.intercept({ path: '/v1/projects?limit=1', method: 'GET' }).reply(
      200,
      {
        ...page(
          [project({ region: 'eu', products: { consent: { id: 'ci_1' }, analytics: {} } })],
          null,
          false,
        ),
        requestId: 'r1',
      },
      { headers: JSON_HEADERS },
    );
    const result = await api.client.listProjects({ limit: 1 });
    expect(result.projects[0]?.products.consent).toEqual({ id: 'ci_1' });
    await api.done();
  });

  it('rejects a page whose project lacks a required field, naming the field', async () => {
    const api = mockApi();
    const broken = project();
    delete broken['organizationSlug'];
    api.pool
      .intercept({ path: '/v1/projects?limit=1', method: 'GET' })
      .reply(200, page([broken], null, false), { headers: JSON_HEADERS });
    const error = await failure(api.client.listProjects({ limit: 1 }));
    expect(error.code).toBe('KR_API_MALFORMED_RESPONSE');
    expect(error.message).toContain('data.0.organizationSlug');
    expect(error.outcomeUnknown).toBe(false);
    await api.done();
  });

  it('rejects a list without pagination', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: '/v1/projects?limit=1', method: 'GET' })
      .reply(200, { success: true, data: [] }, { headers: JSON_HEADERS });
    const error = await failure(api.client.listProjects({ limit: 1 }));
    expect(error.message).toContain('pagination');
    await api.done();
  });

  it('names the content type and length of an HTML 200, not its content', async () => {
    const api = mockApi();
    const html = '<html><title>Sign in to the corporate proxy</title></html>';
    api.pool
      .intercept({ path: '/v1/projects?limit=1', method: 'GET' })
      .reply(200, html, { headers: { 'content-type': 'text/html' } });
    const error = await failure(api.client.listProjects({ limit: 1 }));
    expect(error.code).toBe('KR_API_MALFORMED_RESPONSE');
    expect(error.message).toContain('text/html');
    expect(error.message).toContain(`${Buffer.byteLength(html)} bytes`);
    expect(error.message).not.toContain('corporate proxy');
    await api.done();
  });

  it('names unparseable JSON without quoting it', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: '/v1/projects?limit=1', method: 'GET' })
      .reply(200, '{"success":true,"data":[{"projectId":"prj_tr', { headers: JSON_HEADERS });
    const error = await failure(api.client.listProjects({ limit: 1 }));
    expect(error.message).toContain('unparseable JSON');
    expect(error.message).not.toContain('prj_tr');
    await api.done();
  });

  it('reads delay-seconds Retry-After on 429', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: '/v1/projects?limit=1', method: 'GET' })
      .reply(
        429,
        { success: false, error: { code: 'RATE_LIMITED', message: 'too many' } },
        { headers: { ...JSON_HEADERS, 'retry-after': '7' } },
      );
    const error = await failure(api.client.listProjects({ limit: 1 }));
    expect(error.retryAfterMs).toBe(7_000);
    await api.done();
  });

  it('maps a status the spec does not list to KR_API_UNEXPECTED_STATUS', async () => {
    const api = mockApi();
    api.pool.intercept({ path: '/v1/projects?limit=1', method: 'GET' }).reply(405, '', {});
    const error = await failure(api.client.listProjects({ limit: 1 }));
    expect(error.code).toBe('KR_API_UNEXPECTED_STATUS');
    expect(error.message).toContain('empty body');
    await api.done();
  });
});

describe('ApiClient.projects', () => {
  it('follows nextCursor until hasMore is false', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: '/v1/projects?limit=2', method: 'GET' })
      .reply(200, page([project({ projectId: 'a' }), project({ projectId: 'b' })], 'c1', true), {
        headers: JSON_HEADERS,
      });
    api.pool
      .intercept({ path: '/v1/projects?limit=2&cursor=c1', method: 'GET' })
      .reply(200, page([project({ projectId: 'c' }), project({ projectId: 'd' })], 'c2', true), {
        headers: JSON_HEADERS,
      });
    api.pool
      .intercept({ path: '/v1/projects?limit=2&cursor=c2', method: 'GET' })
      .reply(200, page([project({ projectId: 'e' })], null, false), { headers: JSON_HEADERS });
    const ids: string[] = [];
    for await (const p of api.client.projects({ limit: 2 })) ids.push(p.projectId);
    expect(ids).toEqual(['a', 'b', 'c', 'd', 'e']);
    await api.done();
  });

  it('stops with an error when hasMore is true but nextCursor is null', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: '/v1/projects?limit=100', method: 'GET' })
      .reply(200, page([project()], null, true), { headers: JSON_HEADERS });
    const ids: string[] = [];
    const error = await failure(
      (async () => {
        for await (const p of api.client.projects()) ids.push(p.projectId);
      })(),
    );
    expect(ids).toEqual(['prj_1']);
    expect(error.code).toBe('KR_API_MALFORMED_RESPONSE');
    expect(error.message).toContain('null');
    await api.done();
  });

  it('stops with an error when a cursor repeats instead of looping forever', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: '/v1/projects?limit=100', method: 'GET' })
      .reply(200, page([], 'same', true), { headers: JSON_HEADERS });
    api.pool
      .intercept({ path: '/v1/projects?limit=100&cursor=same', method: 'GET' })
      .reply(200, page([], 'same', true), { headers: JSON_HEADERS });
    const error = await failure(
      (async () => {
        for await (const _ of api.client.projects()) {
          // no items
        }
      })(),
    );
    expect(error.message).toContain('already followed');
    await api.done();
  });
});

describe('ApiClient.updateProject and updateConsent', () => {
  it('PATCHes the project with a JSON body and returns the updated project', async () => {
    const api = mockApi();
    api.pool
      .intercept({
        path: '/v1/projects/prj_1',
        method: 'PATCH',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ projectName: 'Billing v2', description: null }),
      })
      .reply(
        200,
        { success: true, data: project({ projectName: 'Billing v2', projectSlug: 'billing-v2' }) },
        { headers: JSON_HEADERS },
      );
    const updated = await api.client.updateProject('prj_1', { projectName: 'Billing v2', description: null });
    expect(updated.projectSlug).toBe('billing-v2');
    await api.done();
  });

  it('PATCHes consent settings and returns them', async () => {
    const api = mockApi();
    api.pool
      .intercept({
        path: '/v1/projects/prj_1/consent',
        method: 'PATCH',
        body: JSON.stringify({ trustedOrigins: ['*.example.test'], branding: 'none' }),
      })
      .reply(
        200,
        { success: true, data: consentSettings({ trustedOrigins: ['*.example.test'], branding: 'none' }) },
        { headers: JSON_HEADERS },
      );
    const settings = await api.client.updateConsent('prj_1', {
      trustedOrigins: ['*.example.test'],
      branding: 'none',
    });
    expect(settings.branding).toBe('none');
    await api.done();
  });

  it('uses the method override for updates', async () => {
    const api = mockApi({ methods: { updateProject: 'PUT' } });
    api.pool
      .intercept({ path: '/v1/projects/prj_1', method: 'PUT' })
      .reply(200, { success: true, data: project() }, { headers: JSON_HEADERS });
    await api.client.updateProject('prj_1', { description: 'x' });
    await api.done();
  });

  it('rejects consent settings with a branding outside the spec enum', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: '/v1/projects/prj_1/consent', method: 'PATCH' })
      .reply(
        200,
        { success: true, data: consentSettings({ branding: 'brand_c' }) },
        { headers: JSON_HEADERS },
      );
    const error = await failure(api.client.updateConsent('prj_1', { branding: 'brand_a' }));
    expect(error.code).toBe('KR_API_MALFORMED_RESPONSE');
    expect(error.message).toContain('data.branding');
    await api.done();
  });

  it('rejects a project whose dashboardURL is not a URL', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: '/v1/projects/prj_1', method: 'PATCH' })
      .reply(200, { success: true, data: project({ dashboardURL: 'not a url' }) }, { headers: JSON_HEADERS });
    const error = await failure(api.client.updateProject('prj_1', { projectName: 'x' }));
    expect(error.message).toContain('data.dashboardURL');
    await api.done();
  });
});

describe('ApiClient.probeSecret', () => {
  const probed = 'kmk_live_PROBEDsecretPROBEDsecret000001';

  it('answers valid when a one-item list with the secret as bearer succeeds', async () => {
    const api = mockApi();
    api.pool
      .intercept({
        path: '/v1/projects?organizationId=org_1&limit=1',
        method: 'GET',
        headers: { authorization: `Bearer ${probed}` },
      })
      .reply(200, page([], null, false), { headers: JSON_HEADERS });
    expect(await api.client.probeSecret(new Secret(probed), { organizationId: 'org_1' })).toBe('valid');
    await api.done();
  });

  it('answers invalid on 401', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: '/v1/projects?limit=1', method: 'GET' })
      .reply(
        401,
        { success: false, error: { code: 'UNAUTHORIZED', message: 'invalid key' } },
        { headers: JSON_HEADERS },
      );
    expect(await api.client.probeSecret(new Secret(probed))).toBe('invalid');
    await api.done();
  });

  it('throws on any other failure, which says nothing about the key', async () => {
    const api = mockApi();
    api.pool
      .intercept({ path: '/v1/projects?limit=1', method: 'GET' })
      .reply(
        402,
        { success: false, error: { code: 'PLAN_REQUIRED', message: 'upgrade' } },
        { headers: JSON_HEADERS },
      );
    const error = await failure(api.client.probeSecret(new Secret(probed)));
    expect(error.code).toBe('KR_API_PLAN_REQUIRED');
    await api.done();
  });
});

describe('ApiClient with a shared RateLimiter', () => {
  it('makes every client sharing the limiter wait out a 429 that one of them saw', async () => {
    const clock = fakeClock(Date.parse('2030-01-01T00:00:00Z'));
    const limiter = new RateLimiter({ perMinute: 6000, now: clock.now, sleep: clock.sleep });
    const first = mockApi({ limiter, now: clock.now });
    const second = mockApi({ limiter, now: clock.now });
    first.pool
      .intercept({ path: '/v1/projects?limit=1', method: 'GET' })
      .reply(
        429,
        { success: false, error: { code: 'RATE_LIMITED', message: 'slow down' } },
        { headers: { ...JSON_HEADERS, 'retry-after': '10' } },
      );
    second.pool
      .intercept({ path: '/v1/projects?limit=1', method: 'GET' })
      .reply(200, page([], null, false), { headers: JSON_HEADERS });
    await failure(first.client.listProjects({ limit: 1 }));
    const pausedAt = clock.now();
    await second.client.listProjects({ limit: 1 });
    expect(clock.now() - pausedAt).toBeGreaterThanOrEqual(10_000);
    expect(clock.sleeps[0]).toBe(10_000);
    await first.done();
    await second.done();
  });

  it('reports an abort while waiting for the limiter as aborted, having sent nothing', async () => {
    const limiter = new RateLimiter({
      perMinute: 60,
      now: () => 0,
      sleep: () => new Promise<void>(() => undefined),
    });
    limiter.pauseFor(60_000);
    const api = mockApi({ limiter });
    const controller = new AbortController();
    const pending = api.client.listProjects({ limit: 1 }, { signal: controller.signal });
    controller.abort();
    const error = await failure(pending);
    expect(error.code).toBe('KR_API_ABORTED');
    expect(error.outcomeUnknown).toBe(false);
    await api.done();
  });
});
