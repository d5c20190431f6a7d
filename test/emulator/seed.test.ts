// Seed loading (src/emulator/seed.ts): the default seed, a seed file, and the refusals that name
// where a seed is wrong.
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EmulatorSeedError } from '../../src/emulator/errors.ts';
import {
  DEFAULT_SEED_PATH,
  loadEmulatorSeed,
  parseEmulatorSeed,
  type EmulatorSeed,
} from '../../src/emulator/seed.ts';
import { createTempDir } from '../support/temp-dir.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';

const MINIMAL: EmulatorSeed = {
  organizations: [{ id: 'org_a', slug: 'a', name: 'A', plan: 'starter' }],
  apiKeys: [{ id: 'key_a', name: 'a', organizationId: 'org_a' }],
};

function seedError(raw: unknown): EmulatorSeedError {
  try {
    parseEmulatorSeed(raw, 'test-seed');
  } catch (error) {
    if (error instanceof EmulatorSeedError) return error;
    throw error;
  }
  throw new Error('expected the seed to be refused');
}

describe('emulator seed', () => {
  it('the default seed has what the docs promise: enterprise and free/downgraded orgs, demo principals, demo keys, a consent project', async () => {
    const seed = await loadEmulatorSeed();
    expect(seed.organizations.map((o) => o.plan)).toEqual(expect.arrayContaining(['enterprise', 'free']));
    expect(seed.organizations.some((o) => o.downgraded)).toBe(true);
    expect(seed.principals.find((p) => p.token === 'demo-owner-token')?.memberships[0]?.role).toBe('owner');
    expect(seed.principals.some((p) => p.memberships.every((m) => m.role === 'member'))).toBe(true);
    expect(seed.apiKeys.map((k) => k.id)).toEqual(
      expect.arrayContaining(['key_demo_billing', 'key_demo_search', 'key_demo_ingest']),
    );
    expect(seed.projects.some((p) => p.consentInstanceId !== null)).toBe(true);
  });

  it('the default seed file holds no API-key secret', async () => {
    expect(await readFile(DEFAULT_SEED_PATH, 'utf8')).not.toMatch(/kmk_live_/);
  });

  it('loads a JSON seed from a file', async () => {
    const dir = await createTempDir('keyroll-seed-');
    try {
      const path = join(dir.path, 'seed.json');
      await writeFile(path, JSON.stringify(MINIMAL));
      expect((await loadEmulatorSeed(path)).apiKeys[0]?.id).toBe('key_a');
    } finally {
      await dir.remove();
    }
  });

  it('refuses an unknown field, naming where it is', () => {
    const error = seedError({
      ...MINIMAL,
      organizations: [{ id: 'org_a', slug: 'a', name: 'A', plan: 'starter', tier: 'x' }],
    });
    expect(error.code).toBe('KR_EMULATOR_SEED_INVALID');
    expect(error.issues.join('\n')).toMatch(/organizations\.0/);
  });

  it('refuses references to organizations, principals and consent instances that do not exist', () => {
    const error = seedError({
      ...MINIMAL,
      apiKeys: [{ id: 'key_b', name: 'b', organizationId: 'org_missing' }],
      oauthClients: [{ clientId: 'c', clientSecret: 'client-secret', principalId: 'nobody' }],
      projects: [{ id: 'p', name: 'P', organizationId: 'org_a', consentInstanceId: 'cns_missing' }],
    });
    expect(error.issues).toEqual([
      'oauthClients.c: unknown principal nobody',
      'apiKeys.key_b: unknown organization org_missing',
      'projects.p: unknown consent instance cns_missing',
    ]);
  });

  it('refuses two principals sharing a token without quoting the token', () => {
    const principal = (id: string): object => ({
      id,
      name: id,
      kind: 'session',
      token: 'shared-token-value',
      memberships: [{ organizationId: 'org_a', role: 'owner' }],
    });
    const error = seedError({ ...MINIMAL, principals: [principal('p1'), principal('p2')] });
    expect(error.issues).toEqual(['principals: two principals share a token']);
    expectNoSecrets([error.message], ['shared-token-value']);
  });

  it('a missing seed file is a seed error naming the file', async () => {
    await expect(loadEmulatorSeed('/nonexistent/seed.yaml')).rejects.toMatchObject({
      code: 'KR_EMULATOR_SEED_INVALID',
      source: '/nonexistent/seed.yaml',
    });
  });
});
