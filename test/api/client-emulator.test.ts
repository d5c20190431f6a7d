// The client against the emulator over real loopback HTTP: every operation, and every error status
// the spec lists for it, produced the way the service would produce it wherever the emulator can
// (a 500 only exists as an injected fault). One fresh emulator per test: no shared state.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApiClient, type ApiClientOptions } from '../../src/api/client.ts';
import {
  oauthClientCredentials,
  staticCredential,
  type CredentialProvider,
} from '../../src/api/credentials.ts';
import { ApiError, type ApiErrorCode } from '../../src/api/errors.ts';
import { RateLimiter } from '../../src/api/rate-limiter.ts';
import { Secret } from '../../src/audit/secret.ts';
import { startEmulator, type RunningEmulator, type StartEmulatorOptions } from '../../src/emulator/server.ts';

const OWNER = 'demo-owner-token';
const MEMBER = 'demo-member-token';
const ADMIN = 'demo-admin-token';
const ACME = 'org_demo_acme';

/** The emulator's rate windows are whole minutes; starting on a boundary makes Retry-After exact. */
let t: number;
/** How far the emulator's clock runs ahead of keyroll's (clock skew between two machines). */
let skew: number;
let emulator: RunningEmulator;
const clients: ApiClient[] = [];

async function start(options: StartEmulatorOptions = {}): Promise<void> {
  emulator = await startEmulator({ now: () => t + skew, ...options });
}

beforeEach(async () => {
  t = Date.UTC(2030, 0, 1, 0, 0, 0);
  skew = 0;
  await start();
});

afterEach(async () => {
  for (const client of clients.splice(0)) await client.close();
  await emulator.close();
});

function bearer(token: string): CredentialProvider {
  return staticCredential(new Secret(token), 'test bearer');
}

function api(
  credentials: CredentialProvider = bearer(OWNER),
  options: Partial<ApiClientOptions> = {},
): ApiClient {
  const client = new ApiClient({ baseUrl: emulator.url, credentials, now: () => t, ...options });
  clients.push(client);
  return client;
}

/** A fresh API key of `organizationId` allowed `perMinute` calls, as a bearer. */
function apiKeyBearer(organizationId: string, perMinute?: number): CredentialProvider {
  const key = emulator.state.addApiKey({
    name: 'emulator-test',
    organizationId,
    ...(perMinute === undefined ? {} : { rateLimitPerMinute: perMinute }),
  });
  return bearer(key.secret);
}

async function apiError(promise: Promise<unknown>, code: ApiErrorCode, status?: number): Promise<ApiError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiError);
  const apiErr = error as ApiError;
  expect(apiErr.code).toBe(code);
  if (status !== undefined) {
    expect(apiErr.status).toBe(status);
    // The emulator always answers with the spec's envelope: its fields must come through.
    expect(apiErr.apiCode).toBeTypeOf('string');
    expect(apiErr.apiMessage).toBeTypeOf('string');
  }
  return apiErr;
}

describe('roll over loopback', () => {
  it('200: returns the new secret, which is now the live one while the old one is dead', async () => {
    const old = new Secret(emulator.state.currentSecret('key_demo_billing'));
    const client = api();
    const rolled = await client.rollKey('key_demo_billing', { organizationId: ACME });
    expect(rolled.keyId).toBe('key_demo_billing');
    expect(rolled.malformed).toBeUndefined();
    expect(rolled.secret.reveal()).toBe(emulator.state.currentSecret('key_demo_billing'));
    expect(emulator.state.rollCount('key_demo_billing')).toBe(1);
    expect(await client.probeSecret(old, { organizationId: ACME })).toBe('invalid');
    expect(await client.probeSecret(rolled.secret, { organizationId: ACME })).toBe('valid');
  });

  it('400: an invalid key id', async () => {
    const error = await apiError(api().rollKey('not a key!'), 'KR_API_BAD_REQUEST', 400);
    expect(error.outcomeUnknown).toBe(false);
  });

  it('401: an unknown bearer', async () => {
    await apiError(api(bearer('no-such-token')).rollKey('key_demo_billing'), 'KR_API_UNAUTHORIZED', 401);
  });

  it('402: the organization is downgraded', async () => {
    const error = await apiError(
      api().rollKey('key_demo_lapsed', { organizationId: 'org_demo_lapsed' }),
      'KR_API_PLAN_REQUIRED',
      402,
    );
    expect(error.apiCode).toBe('PLAN_REQUIRED');
  });

  it('403: an API key may never roll a key', async () => {
    const error = await apiError(
      api(apiKeyBearer(ACME)).rollKey('key_demo_billing'),
      'KR_API_FORBIDDEN',
      403,
    );
    expect(error.apiCode).toBe('FORBIDDEN');
    expect(emulator.state.rollCount('key_demo_billing')).toBe(0);
  });

  it('403: a member may not roll', async () => {
    await apiError(
      api(bearer(MEMBER)).rollKey('key_demo_billing', { organizationId: ACME }),
      'KR_API_FORBIDDEN',
      403,
    );
  });

  it('404: no such key', async () => {
    await apiError(api().rollKey('key_does_not_exist', { organizationId: ACME }), 'KR_API_NOT_FOUND', 404);
  });

  it('429: the roll rate is spent; Retry-After pauses the shared limiter', async () => {
    await emulator.close();
    await start({ rollRateLimitPerMinute: 1 });
    const limiter = new RateLimiter({ perMinute: 600, now: () => t });
    const client = api(bearer(OWNER), { limiter });
    await client.rollKey('key_demo_billing', { organizationId: ACME });
    t += 15_000;
    const error = await apiError(
      client.rollKey('key_demo_search', { organizationId: ACME }),
      'KR_API_RATE_LIMITED',
      429,
    );
    expect(error.retryAfterMs).toBe(45_000);
    expect(error.outcomeUnknown).toBe(false);
    expect(limiter.pausedUntil()).toBe(t + 45_000);
    expect(emulator.state.rollCount('key_demo_search')).toBe(0);
  });

  it('500: outcome unknown; here the roll was not applied, so the stored secret still works', async () => {
    const old = new Secret(emulator.state.currentSecret('key_demo_billing'));
    emulator.faults.inject('roll', { kind: 'status', status: 500 });
    const client = api();
    const error = await apiError(
      client.rollKey('key_demo_billing', { organizationId: ACME }),
      'KR_API_SERVER_ERROR',
      500,
    );
    expect(error.outcomeUnknown).toBe(true);
    expect(error.retryable).toBe(true);
    expect(await client.probeSecret(old, { organizationId: ACME })).toBe('valid');
  });

  it('500 after the roll applied: outcome unknown, and the probe shows the old secret is dead', async () => {
    const old = new Secret(emulator.state.currentSecret('key_demo_billing'));
    emulator.faults.inject('roll', { kind: 'failAfterApply', then: 'status500' });
    const client = api();
    const error = await apiError(
      client.rollKey('key_demo_billing', { organizationId: ACME }),
      'KR_API_SERVER_ERROR',
      500,
    );
    expect(error.outcomeUnknown).toBe(true);
    expect(emulator.state.rollCount('key_demo_billing')).toBe(1);
    expect(await client.probeSecret(old, { organizationId: ACME })).toBe('invalid');
  });

  it('a connection dropped after the roll applied is a connection error with unknown outcome', async () => {
    emulator.faults.inject('roll', { kind: 'failAfterApply', then: 'drop' });
    const error = await apiError(
      api().rollKey('key_demo_billing', { organizationId: ACME }),
      'KR_API_CONNECTION',
    );
    expect(error.outcomeUnknown).toBe(true);
  });

  it('an answer that never comes is a timeout with unknown outcome', async () => {
    emulator.faults.inject('roll', { kind: 'failAfterApply', then: 'hang' });
    const error = await apiError(
      api(bearer(OWNER), { headersTimeoutMs: 200 }).rollKey('key_demo_billing', { organizationId: ACME }),
      'KR_API_TIMEOUT',
    );
    expect(error.outcomeUnknown).toBe(true);
  });

  it('a roll answer that is not JSON is outcome unknown, though the roll was applied', async () => {
    emulator.faults.inject('roll', {
      kind: 'malformed',
      body: '<html><pre>{{key}}</pre></html>',
      contentType: 'text/html',
    });
    const error = await apiError(
      api().rollKey('key_demo_billing', { organizationId: ACME }),
      'KR_API_MALFORMED_RESPONSE',
    );
    expect(error.outcomeUnknown).toBe(true);
    expect(emulator.state.rollCount('key_demo_billing')).toBe(1);
  });

  it('a roll answer off the spec that still carries data.key hands the secret over, flagged', async () => {
    emulator.faults.inject('roll', {
      kind: 'malformed',
      body: '{"success":true,"data":{"key":"{{key}}"}}',
      contentType: 'text/plain',
    });
    const rolled = await api().rollKey('key_demo_billing', { organizationId: ACME });
    expect(rolled.secret.reveal()).toBe(emulator.state.currentSecret('key_demo_billing'));
    expect(rolled.malformed).toContain('data.keyId');
    expect(rolled.malformed).toContain('content-type text/plain');
  });
});

describe('listProjects over loopback', () => {
  it('200: pages through every visible project following the cursor', async () => {
    const expected = [...emulator.state.projects.values()]
      .filter((p) => p.organizationId === ACME)
      .map((p) => p.id)
      .sort();
    expect(expected.length).toBeGreaterThan(2);
    const ids: string[] = [];
    for await (const project of api().projects({ limit: 2, organizationId: ACME }))
      ids.push(project.projectId);
    expect(ids).toEqual(expected);
    expect(emulator.state.callCount('listProjects')).toBe(Math.ceil(expected.length / 2));
  });

  it('200: one page reports the cursor and hasMore', async () => {
    const page = await api().listProjects({ limit: 1, organizationId: ACME });
    expect(page.projects).toHaveLength(1);
    expect(page.hasMore).toBe(true);
    expect(page.nextCursor).toBeTypeOf('string');
  });

  it('400: limit outside 1 to 100', async () => {
    await apiError(api().listProjects({ limit: 101 }), 'KR_API_BAD_REQUEST', 400);
  });

  it('400: a cursor the API did not issue', async () => {
    await apiError(api().listProjects({ limit: 10, cursor: 'forged' }), 'KR_API_BAD_REQUEST', 400);
  });

  it('401: an unknown bearer', async () => {
    await apiError(api(bearer('no-such-token')).listProjects({ limit: 1 }), 'KR_API_UNAUTHORIZED', 401);
  });

  it('402: an API key of a downgraded organization', async () => {
    await apiError(
      api(apiKeyBearer('org_demo_lapsed')).listProjects({ limit: 1 }),
      'KR_API_PLAN_REQUIRED',
      402,
    );
  });

  it('403: an organization the caller cannot access', async () => {
    await apiError(
      api(bearer(ADMIN)).listProjects({ limit: 1, organizationId: 'org_demo_starter' }),
      'KR_API_FORBIDDEN',
      403,
    );
  });

  it('429: an API key past its per-minute rate, with Retry-After', async () => {
    const client = api(apiKeyBearer('org_demo_starter', 1));
    await client.listProjects({ limit: 1 });
    t += 20_000;
    const error = await apiError(client.listProjects({ limit: 1 }), 'KR_API_RATE_LIMITED', 429);
    expect(error.retryAfterMs).toBe(40_000);
  });

  it('500: an internal error', async () => {
    emulator.faults.inject('listProjects', { kind: 'status', status: 500 });
    const error = await apiError(api().listProjects({ limit: 1 }), 'KR_API_SERVER_ERROR', 500);
    expect(error.outcomeUnknown).toBe(false);
  });

  it('a dropped connection is a connection error', async () => {
    emulator.faults.inject('listProjects', { kind: 'drop' });
    await apiError(api().listProjects({ limit: 1 }), 'KR_API_CONNECTION');
  });
});

describe('updateProject over loopback', () => {
  it('200: renaming regenerates the slug', async () => {
    const before = emulator.state.project('prj_demo_analytics').slug;
    const updated = await api().updateProject('prj_demo_analytics', {
      projectName: 'Product Analytics',
      description: null,
    });
    expect(updated.projectName).toBe('Product Analytics');
    expect(updated.projectSlug).not.toBe(before);
    expect(updated.projectSlug).toBe(emulator.state.project('prj_demo_analytics').slug);
  });

  it('200: the PUT override reaches the same operation', async () => {
    const updated = await api(bearer(OWNER), { methods: { updateProject: 'PUT' } }).updateProject(
      'prj_demo_mobile',
      { description: 'Phones' },
    );
    expect(updated.description).toBe('Phones');
  });

  it('400: a name with no letters or digits', async () => {
    await apiError(
      api().updateProject('prj_demo_analytics', { projectName: '!!!' }),
      'KR_API_BAD_REQUEST',
      400,
    );
  });

  it('401: an unknown bearer', async () => {
    await apiError(
      api(bearer('no-such-token')).updateProject('prj_demo_analytics', { description: 'x' }),
      'KR_API_UNAUTHORIZED',
      401,
    );
  });

  it('403: a member may not update', async () => {
    await apiError(
      api(bearer(MEMBER)).updateProject('prj_demo_analytics', { description: 'x' }),
      'KR_API_FORBIDDEN',
      403,
    );
  });

  it('404: no such project', async () => {
    await apiError(api().updateProject('prj_does_not_exist', { description: 'x' }), 'KR_API_NOT_FOUND', 404);
  });

  it('409: the new slug is taken by another project', async () => {
    await apiError(
      api().updateProject('prj_demo_mobile', { projectName: 'Storefront' }),
      'KR_API_CONFLICT',
      409,
    );
  });

  it('413: a body over 1 MB', async () => {
    await apiError(
      api().updateProject('prj_demo_analytics', { description: 'x'.repeat(1_100_000) }),
      'KR_API_PAYLOAD_TOO_LARGE',
      413,
    );
  });

  it('429: an API key past its per-minute rate', async () => {
    const client = api(apiKeyBearer(ACME, 1));
    await client.updateProject('prj_demo_analytics', { description: 'first' });
    await apiError(
      client.updateProject('prj_demo_analytics', { description: 'second' }),
      'KR_API_RATE_LIMITED',
      429,
    );
  });

  it('500: an internal error', async () => {
    emulator.faults.inject('updateProject', { kind: 'status', status: 500 });
    await apiError(
      api().updateProject('prj_demo_analytics', { description: 'x' }),
      'KR_API_SERVER_ERROR',
      500,
    );
  });
});

describe('updateConsent over loopback', () => {
  it('200: sets trusted origins and branding', async () => {
    const settings = await api().updateConsent('prj_demo_storefront', {
      trustedOrigins: ['https://shop.acme.example', '*.acme.example', '*'],
      branding: 'none',
    });
    expect(settings.trustedOrigins).toEqual(['https://shop.acme.example', '*.acme.example', '*']);
    expect(settings.branding).toBe('none');
    expect(settings.instanceId).toBe('cns_demo_storefront');
  });

  it('400: an origin pattern the spec does not allow', async () => {
    const error = await apiError(
      api().updateConsent('prj_demo_storefront', { trustedOrigins: ['shop.*.example'] }),
      'KR_API_BAD_REQUEST',
      400,
    );
    expect(error.apiCode).toBe('INVALID_ORIGIN');
    expect(error.details).toMatchObject({ index: 0 });
  });

  it('401: an unknown bearer', async () => {
    await apiError(
      api(bearer('no-such-token')).updateConsent('prj_demo_storefront', { branding: 'brand_a' }),
      'KR_API_UNAUTHORIZED',
      401,
    );
  });

  it('403: a member may not update', async () => {
    await apiError(
      api(bearer(MEMBER)).updateConsent('prj_demo_storefront', { branding: 'brand_a' }),
      'KR_API_FORBIDDEN',
      403,
    );
  });

  it('404: the project has no consent instance', async () => {
    await apiError(
      api().updateConsent('prj_demo_analytics', { branding: 'brand_a' }),
      'KR_API_NOT_FOUND',
      404,
    );
  });

  it('409: the consent instance is locked by another change', async () => {
    await apiError(api().updateConsent('prj_demo_checkout', { branding: 'brand_a' }), 'KR_API_CONFLICT', 409);
  });

  it('413: a body over 1 MB', async () => {
    await apiError(
      api().updateConsent('prj_demo_storefront', {
        trustedOrigins: [`https://${'a'.repeat(1_100_000)}.example`],
      }),
      'KR_API_PAYLOAD_TOO_LARGE',
      413,
    );
  });

  it('429: an API key past its per-minute rate', async () => {
    const client = api(apiKeyBearer(ACME, 1));
    await client.updateConsent('prj_demo_storefront', { branding: 'brand_b' });
    await apiError(
      client.updateConsent('prj_demo_storefront', { branding: 'brand_a' }),
      'KR_API_RATE_LIMITED',
      429,
    );
  });

  it('500: an internal error', async () => {
    emulator.faults.inject('updateConsent', { kind: 'status', status: 500 });
    await apiError(
      api().updateConsent('prj_demo_storefront', { branding: 'brand_a' }),
      'KR_API_SERVER_ERROR',
      500,
    );
  });
});

describe('OAuth2 client credentials against the emulator', () => {
  function oauth(refreshBeforeMs?: number): CredentialProvider {
    return oauthClientCredentials({
      tokenUrl: `${emulator.url}/oauth/token`,
      clientId: 'demo-keyroll-client',
      clientSecret: staticCredential(new Secret('demo-keyroll-client-secret')),
      scope: 'keys:roll projects:read',
      now: () => t,
      ...(refreshBeforeMs === undefined ? {} : { refreshBeforeMs }),
    });
  }

  it('rolls a key with a token from the token endpoint', async () => {
    const rolled = await api(oauth()).rollKey('key_demo_billing', { organizationId: ACME });
    expect(rolled.secret.reveal()).toBe(emulator.state.currentSecret('key_demo_billing'));
  });

  it('refreshes the token before the emulator would expire it, never meeting a 401', async () => {
    await emulator.close();
    await start({ oauthTokenTtlSeconds: 120 });
    const inner = oauth(30_000);
    let invalidations = 0;
    const counted: CredentialProvider = {
      description: inner.description,
      token: () => inner.token(),
      invalidate: () => {
        invalidations += 1;
        inner.invalidate?.();
      },
    };
    const client = api(counted);
    const first = (await counted.token()).reveal();
    await client.listProjects({ limit: 1, organizationId: ACME });
    t += 100_000; // inside the 30 s refresh window, before expiry
    expect((await counted.token()).reveal()).not.toBe(first);
    t += 100_000; // past the first token's expiry: only the refreshed one works
    await client.listProjects({ limit: 1, organizationId: ACME });
    expect(invalidations).toBe(0);
  });

  it('replaces a token the API refuses before its announced expiry, once', async () => {
    const credentials = oauth();
    const client = api(credentials);
    await client.listProjects({ limit: 1, organizationId: ACME });
    // The emulator's clock jumps ahead of keyroll's: it now holds the cached token expired,
    // while keyroll still thinks it has an hour left. The 401 leads to one fresh token.
    skew = 2 * 3600_000;
    const rolled = await client.rollKey('key_demo_billing', { organizationId: ACME });
    expect(rolled.secret.reveal()).toBe(emulator.state.currentSecret('key_demo_billing'));
    expect(emulator.state.rollCount('key_demo_billing')).toBe(1);
  });
});
