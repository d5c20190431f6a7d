// `keyroll plan`'s estimate of an emergency (invariant 11): the slowest budget bounds the run,
// an AWS account's write quota per region for keys stored in AWS, the API's rate otherwise.
import { describe, expect, it } from 'vitest';
import type { BackendConfig } from '../../src/backends/config.ts';
import type { Policy } from '../../src/policy/schema.ts';
import {
  describeEmergency,
  estimateEmergency,
  formatSeconds,
} from '../../src/rotation/emergency-estimate.ts';
import { keyPolicy } from './harness.ts';

function policyWith(
  backends: Record<string, BackendConfig>,
  keys: { backend: string; fallback?: string }[],
  rateLimitPerMinute = 6_000,
): Policy {
  return {
    file: 'policy.yaml',
    api: {
      baseUrl: 'https://api.example.test',
      credential: { type: 'bearer', token: 'env:KEYROLL_API_TOKEN' },
      methods: { roll: 'POST', listProjects: 'GET', updateProject: 'PATCH', updateConsent: 'PATCH' },
      timeouts: { headersMs: 2_000, bodyMs: 2_000 },
      rateLimitPerMinute,
    },
    backends,
    alerts: { sinks: {} },
    keys: keys.map((key, i) =>
      keyPolicy(`key_${String(i)}`, 'org_a', {
        destinations: [
          {
            backend: key.backend,
            target: {
              path: `keyroll/${String(i)}`,
              shape: { format: 'raw', secretField: 'apiKey', fields: [] },
            },
          },
        ],
        fallbacks:
          key.fallback === undefined
            ? []
            : [
                {
                  backend: key.fallback,
                  target: {
                    path: `keyroll/${String(i)}.fallback`,
                    shape: { format: 'raw', secretField: 'apiKey', fields: [] },
                  },
                },
              ],
      }),
    ),
  };
}

const aws = (region: string, quotas?: { writesPerSecond: number }): BackendConfig => ({
  kind: 'aws',
  region,
  createIfMissing: false,
  tags: {},
  timeoutMs: 10_000,
  ...(quotas
    ? {
        quotas: {
          writesPerSecond: quotas.writesPerSecond,
          tagsPerSecond: 50,
          readsPerSecond: 10_000,
          createsPerSecond: 50,
          shareAmongShards: true,
          maxWaitMs: 60_000,
          versionsPerSecret: 100,
        },
      }
    : {}),
});

describe('estimateEmergency', () => {
  it("bounds 1,000 AWS keys by the account's write quota in their region: 4 writes each at 50 per second", () => {
    const policy = policyWith(
      { prod: aws('eu-west-1') },
      Array.from({ length: 1_000 }, () => ({ backend: 'prod' })),
    );
    const estimate = estimateEmergency(policy, policy.keys);
    expect(estimate.seconds).toBe(80);
    expect(estimate.boundBy).toMatchObject({
      budget: 'aws aws eu-west-1 write',
      calls: 4_000,
      ratePerSecond: 50,
    });
    expect(estimate.bounds.find((b) => b.budget === 'api')?.seconds).toBe(10);
    expect(describeEmergency(estimate)).toBe(
      'an emergency over these 1000 keys (rotate --reason leak) takes at least 1m20s, bound by the AWS write quota of aws eu-west-1 (4000 calls at 50/s); the API alone would allow it in 10s: faster only with fewer keys per account and region (spread destinations over regions or accounts), not with more --concurrency or shards',
    );
  });

  it('gives a shard its share: 1/8 of the keys at 1/8 of the quota take as long', () => {
    const policy = policyWith(
      { prod: aws('eu-west-1') },
      Array.from({ length: 125 }, () => ({ backend: 'prod' })),
    );
    expect(estimateEmergency(policy, policy.keys, { shards: 8 }).seconds).toBe(80);
  });

  it('halves with the keys spread over two regions, and follows a lower quota the policy states', () => {
    const spread = policyWith(
      { east: aws('us-east-1'), west: aws('us-west-2') },
      Array.from({ length: 1_000 }, (_, i) => ({ backend: i % 2 === 0 ? 'east' : 'west' })),
    );
    expect(estimateEmergency(spread, spread.keys).seconds).toBe(40);
    const shared = policyWith(
      { prod: aws('eu-west-1', { writesPerSecond: 25 }) },
      Array.from({ length: 100 }, () => ({ backend: 'prod' })),
    );
    expect(estimateEmergency(shared, shared.keys).seconds).toBe(16);
  });

  it('counts an AWS fallback (preflighted every rotation) in its own region', () => {
    const policy = policyWith(
      { files: { kind: 'file', directory: '/tmp/x' }, backup: aws('eu-west-1') },
      Array.from({ length: 500 }, () => ({ backend: 'files', fallback: 'backup' })),
    );
    const estimate = estimateEmergency(policy, policy.keys);
    expect(estimate.boundBy).toMatchObject({ budget: 'aws aws eu-west-1 write', calls: 1_000, seconds: 20 });
  });

  it('is bound by the API when no destination has a known quota', () => {
    const policy = policyWith(
      { files: { kind: 'file', directory: '/tmp/x' } },
      Array.from({ length: 300 }, () => ({ backend: 'files' })),
      600,
    );
    const estimate = estimateEmergency(policy, policy.keys);
    expect(estimate).toMatchObject({ seconds: 30, boundBy: { budget: 'api' } });
    expect(describeEmergency(estimate)).toBe(
      'an emergency over these 300 keys (rotate --reason leak) takes at least 30s, bound by the API rate keyroll paces itself at (api.rateLimitPerMinute: 600/min)',
    );
  });

  it('writes seconds as a person reads them, rounded up', () => {
    expect([formatSeconds(0.03), formatSeconds(9.96), formatSeconds(41.2), formatSeconds(125)]).toEqual([
      '0.1s',
      '10s',
      '42s',
      '2m05s',
    ]);
  });
});
