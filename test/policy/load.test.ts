import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadEmulatorSeed } from '../../src/emulator/seed.ts';
import { PolicyError } from '../../src/policy/errors.ts';
import { loadPolicy, MAX_POLICY_BYTES, parsePolicy } from '../../src/policy/load.ts';
import { useTempDir } from '../support/temp-dir.ts';

const CONFIG_DIR = new URL('../../config/', import.meta.url);

const MINIMAL = `version: 1
api:
  baseUrl: http://127.0.0.1:8787
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
backends:
  files: { kind: file, directory: ./secrets }
keys:
  - id: key_a
    organization: org_a
    destinations: [{ backend: files, path: a.json }]
    schedule: "0 3 * * 1"
`;

function policyError(run: () => unknown): PolicyError {
  try {
    run();
  } catch (error) {
    if (error instanceof PolicyError) return error;
    throw error;
  }
  throw new Error('expected a PolicyError');
}

describe('example policies', () => {
  it('every config/*-policy.yaml loads', async () => {
    const files = (await readdir(CONFIG_DIR)).filter((name) => name.endsWith('-policy.yaml'));
    expect(files).toEqual(
      expect.arrayContaining([
        'aws-policy.yaml',
        'demo-policy.yaml',
        'slot-policy.yaml',
        'vault-policy.yaml',
      ]),
    );
    for (const name of files) {
      const policy = await loadPolicy(new URL(name, CONFIG_DIR).pathname);
      expect(policy.keys.length, name).toBeGreaterThan(0);
    }
  });

  it('the demo policy rotates the three demo keys and one slot entry of the emulator seed through the file backend', async () => {
    const policy = await loadPolicy(new URL('demo-policy.yaml', CONFIG_DIR).pathname);
    expect(policy.keys.map((key) => key.id)).toEqual([
      'key_demo_billing',
      'key_demo_search',
      'key_demo_ingest',
      'billing-api',
    ]);
    expect(policy.keys[3]).toMatchObject({
      slots: ['key_demo_billing_a', 'key_demo_billing_b'],
      consumerRefreshMs: 3_600_000,
    });
    expect(policy.keys[3]?.destinations[0]?.target).toMatchObject({
      path: 'billing-api.json',
      shape: { format: 'json', fields: expect.arrayContaining(['keyId']) as unknown },
    });
    // Every API key the demo rolls exists in the default seed, in the entry's organization.
    const seed = await loadEmulatorSeed();
    for (const key of policy.keys) {
      for (const apiKeyId of key.slots ?? [key.id]) {
        expect(seed.apiKeys.find((apiKey) => apiKey.id === apiKeyId)?.organizationId, apiKeyId).toBe(
          key.organizationId,
        );
      }
    }
    for (const key of policy.keys) {
      expect(key.organizationId).toBe('org_demo_acme');
      for (const destination of [...key.destinations, ...key.fallbacks]) {
        expect(policy.backends[destination.backend]?.kind).toBe('file');
      }
    }
  });
});

describe('resolving defaults', () => {
  it('fills built-in defaults when the policy names none', () => {
    const policy = parsePolicy(MINIMAL, 'policy.yaml');
    expect(policy.file).toBe('policy.yaml');
    expect(policy.api).toEqual({
      baseUrl: 'http://127.0.0.1:8787',
      credential: { type: 'bearer', token: 'env:KEYROLL_API_TOKEN' },
      methods: { roll: 'POST', listProjects: 'GET', updateProject: 'PATCH', updateConsent: 'PATCH' },
      timeouts: { headersMs: 10_000, bodyMs: 10_000 },
      rateLimitPerMinute: 600,
    });
    expect(policy.alerts).toEqual({ sinks: {} });
    expect(policy.escrow).toBeUndefined();
    expect(policy.keys).toEqual([
      {
        id: 'key_a',
        organizationId: 'org_a',
        destinations: [
          {
            backend: 'files',
            target: {
              path: 'a.json',
              shape: {
                format: 'json',
                secretField: 'apiKey',
                fields: ['keyId', 'organizationId', 'rotatedAt'],
              },
            },
          },
        ],
        fallbacks: [],
        schedule: '0 3 * * 1',
        timezone: 'UTC',
        minIntervalMs: 3_600_000,
        lockTtlMs: 900_000,
        clockSkewMs: 10_000,
        verify: { readBack: true, apiCall: true },
        store: { attempts: 5, initialBackoffMs: 200, maxBackoffMs: 5_000 },
        notify: { onFailure: [], onSuccess: [] },
        labels: {},
        driftCheckMs: 3_600_000,
        onDrift: 'rotate',
        failures: {
          backoffInitialMs: 3_600_000,
          backoffCapMs: 86_400_000,
          jitter: 0.2,
          quarantineAfter: 5,
          remindEveryMs: 86_400_000,
        },
        refreshConsumers: 'needed',
      },
    ]);
  });

  it('merges defaults field by field and lets a key override any of them', () => {
    const policy = parsePolicy(
      `version: 1
api:
  baseUrl: https://keys.example.com
  credential: { type: bearer, token: env:T }
backends:
  files: { kind: file, directory: ./secrets }
alerts:
  sinks:
    oncall: { kind: pagerduty, routingKey: env:PD }
    hook: { kind: webhook, url: https://hooks.example.com/x }
defaults:
  schedule: "0 3 * * 1"
  timezone: Europe/Berlin
  maxAge: 30d
  minInterval: 2h
  verify: { apiCall: false }
  store: { attempts: 3, maxBackoff: 10s }
  notify: { onSuccess: [hook] }
keys:
  - id: inherits
    organization: org_a
    destinations: [{ backend: files, path: a }]
  - id: overrides
    organization: org_a
    destinations: [{ backend: files, path: b, shape: { format: raw } }]
    schedule: null
    maxAge: 7d
    timezone: UTC
    verify: { readBack: false }
    store: { initialBackoff: 1s }
    notify: { onFailure: [oncall] }
    labels: { team: billing }
`,
      'policy.yaml',
    );
    const [inherits, overrides] = policy.keys;
    expect(inherits).toMatchObject({
      schedule: '0 3 * * 1',
      timezone: 'Europe/Berlin',
      maxAgeMs: 30 * 86_400_000,
      minIntervalMs: 7_200_000,
      verify: { readBack: true, apiCall: false },
      store: { attempts: 3, initialBackoffMs: 200, maxBackoffMs: 10_000 },
      // Without an onFailure list anywhere, failures reach every sink.
      notify: { onFailure: ['oncall', 'hook'], onSuccess: ['hook'] },
    });
    expect(overrides?.schedule).toBeUndefined();
    expect(overrides).toMatchObject({
      timezone: 'UTC',
      maxAgeMs: 7 * 86_400_000,
      verify: { readBack: false, apiCall: false },
      store: { attempts: 3, initialBackoffMs: 1_000, maxBackoffMs: 10_000 },
      notify: { onFailure: ['oncall'], onSuccess: ['hook'] },
      labels: { team: 'billing' },
    });
    expect(overrides?.destinations[0]?.target.shape).toEqual({
      format: 'raw',
      secretField: 'apiKey',
      fields: [],
    });
  });

  it('merges failures (backoff and quarantine) field by field, backoff fields one by one', () => {
    const policy = parsePolicy(
      `${MINIMAL.replace(/keys:[\s\S]*$/, '')}defaults:
  schedule: "0 3 * * 1"
  failures: { backoff: { initial: 30m, jitter: 0 }, remindEvery: 12h }
keys:
  - id: inherits
    organization: org_a
    destinations: [{ backend: files, path: a }]
  - id: overrides
    organization: org_a
    destinations: [{ backend: files, path: b }]
    failures: { backoff: { cap: 6h }, quarantineAfter: 3 }
`,
      'policy.yaml',
    );
    const [inherits, overrides] = policy.keys;
    expect(inherits?.failures).toEqual({
      backoffInitialMs: 1_800_000,
      backoffCapMs: 86_400_000,
      jitter: 0,
      quarantineAfter: 5,
      remindEveryMs: 43_200_000,
    });
    expect(overrides?.failures).toEqual({
      backoffInitialMs: 1_800_000,
      backoffCapMs: 21_600_000,
      jitter: 0,
      quarantineAfter: 3,
      remindEveryMs: 43_200_000,
    });
  });

  it('refuses a jitter outside 0..1 and a quarantineAfter below 1, naming the line', () => {
    const doc = (failures: string): string => `${MINIMAL}    failures: ${failures}\n`;
    expect(
      policyError(() => parsePolicy(doc('{ backoff: { jitter: 1.5 } }'), 'policy.yaml')).message,
    ).toMatch(/policy\.yaml:\d+.*jitter/s);
    expect(policyError(() => parsePolicy(doc('{ quarantineAfter: 0 }'), 'policy.yaml')).message).toMatch(
      /policy\.yaml:\d+.*quarantineAfter/s,
    );
  });
});

describe('JSON input', () => {
  it('reads a JSON policy (tabs, $schema) and reports its errors with lines', () => {
    const json = `{
\t"$schema": "./policy.schema.json",
\t"version": 1,
\t"api": { "baseUrl": "http://127.0.0.1:8787", "credential": { "type": "bearer", "token": "env:T" } },
\t"backends": { "files": { "kind": "file", "directory": "./s" } },
\t"keys": [
\t\t{ "id": "k", "organization": "o", "destinations": [{ "backend": "files", "path": "k.json" }], "maxAge": "7d" }
\t]
}
`;
    expect(parsePolicy(json, 'policy.json').keys[0]?.maxAgeMs).toBe(7 * 86_400_000);
    const error = policyError(() =>
      parsePolicy(json.replace('"maxAge": "7d"', '"maxAge": "7 days"'), 'policy.json'),
    );
    expect(error.message).toBe(
      'policy.json:7 keys[0].maxAge: "7 days" is not a duration (use a number and a unit: ms, s, m, h, d or w, e.g. 15m or 7d)',
    );
  });
});

describe('reading the file', () => {
  const dir = useTempDir('keyroll-policy-');

  it('names the file as given when it does not exist', async () => {
    const file = join(dir.path(), 'missing.yaml');
    await expect(loadPolicy(file)).rejects.toMatchObject({
      code: 'KR_POLICY_UNREADABLE',
      message: `${file}: cannot be read: no such file`,
    });
  });

  it('refuses a directory', async () => {
    await expect(loadPolicy(dir.path())).rejects.toMatchObject({
      code: 'KR_POLICY_UNREADABLE',
      message: `${dir.path()}: cannot be read: it is a directory, not a policy file`,
    });
  });

  it('refuses a file over 1 MiB without parsing it', async () => {
    const file = join(dir.path(), 'huge.yaml');
    // Invalid YAML throughout: any syntax report would prove it was parsed.
    await writeFile(file, ':\n'.repeat(MAX_POLICY_BYTES / 2 + 1));
    await expect(loadPolicy(file)).rejects.toMatchObject({
      code: 'KR_POLICY_UNREADABLE',
      message: `${file}: is too large (more than 1 MiB); a policy may be at most 1 MiB, so it was not parsed`,
    });
    expect(() => parsePolicy('#'.repeat(MAX_POLICY_BYTES + 1), 'p.yaml')).toThrow(
      /p\.yaml: is too large \(1048577 bytes\)/,
    );
  });

  it('refuses bytes that are not UTF-8', async () => {
    const file = join(dir.path(), 'latin1.yaml');
    await writeFile(file, Buffer.from([0x76, 0x65, 0x72, 0x3a, 0x20, 0xe9, 0x0a]));
    await expect(loadPolicy(file)).rejects.toMatchObject({
      code: 'KR_POLICY_UNREADABLE',
      message: `${file}: is not UTF-8 text`,
    });
  });

  it('loads a valid file from disk', async () => {
    const file = join(dir.path(), 'policy.yaml');
    await writeFile(file, MINIMAL);
    const policy = await loadPolicy(file);
    expect(policy.file).toBe(file);
    expect(policy.keys.map((key) => key.id)).toEqual(['key_a']);
  });
});
