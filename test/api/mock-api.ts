// MockAgent plumbing for the narrow cases a real server cannot show (malformed bodies, errors
// injected at exact points). Every interceptor a test registers must be used: `done()` asserts it.
import { MockAgent, type Interceptable } from 'undici';
import { Secret } from '../../src/audit/secret.ts';
import { ApiClient, type ApiClientOptions } from '../../src/api/client.ts';
import { staticCredential } from '../../src/api/credentials.ts';

export const API_ORIGIN = 'http://api.keyroll.test';
export const BEARER = 'test-bearer-credential-0001';
export const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8' };

export interface MockApi {
  agent: MockAgent;
  pool: Interceptable;
  client: ApiClient;
  /** Asserts every interceptor was used, then closes the agent. */
  done(): Promise<void>;
}

export function mockApi(options: Partial<ApiClientOptions> = {}): MockApi {
  const agent = new MockAgent();
  agent.disableNetConnect();
  const client = new ApiClient({
    baseUrl: API_ORIGIN,
    credentials: staticCredential(new Secret(BEARER)),
    dispatcher: agent,
    ...options,
  });
  return {
    agent,
    pool: agent.get(API_ORIGIN),
    client,
    done: async () => {
      agent.assertNoPendingInterceptors();
      await client.close();
      await agent.close();
    },
  };
}

export function project(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    projectId: 'prj_1',
    projectSlug: 'billing',
    projectName: 'Billing',
    description: null,
    organizationId: 'org_1',
    organizationSlug: 'acme',
    dashboardURL: 'https://dashboard.example.test/p/prj_1',
    products: { consent: null },
    ...overrides,
  };
}

export function consentSettings(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    instanceId: 'ci_1',
    instanceSlug: 'billing-consent',
    instanceName: 'Billing consent',
    trustedOrigins: ['https://app.example.test'],
    branding: 'brand_a',
    backendURL: null,
    backendVersion: '1.0.0',
    dashboardURL: 'https://dashboard.example.test/c/ci_1',
    ...overrides,
  };
}

/**
 * A clock that only moves when the limiter sleeps (or the test advances it), so no test depends
 * on wall-clock time; `sleeps` lists every sleep. Pass `now` and `sleep` to a RateLimiter.
 */
export function fakeClock(start = 1_000_000): {
  now: () => number;
  sleep: (ms: number) => Promise<void>;
  sleeps: number[];
  advance: (ms: number) => void;
} {
  let t = start;
  const sleeps: number[] = [];
  return {
    now: () => t,
    sleep: (ms) => {
      sleeps.push(ms);
      t += ms;
      return Promise.resolve();
    },
    sleeps,
    advance: (ms) => {
      t += ms;
    },
  };
}
