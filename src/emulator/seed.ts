// The emulator's starting world, read from YAML or JSON (config/emulator-seed.yaml by default).
// Parsed strictly: a typo in a seed would silently change what a test exercises.
// Seeds hold no API-key secrets: those are minted at random when the emulator starts.
import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';
import { installedFile } from '../install-files.ts';
import { EmulatorSeedError } from './errors.ts';
import { PLANS } from './plans.ts';

export const DEFAULT_SEED_PATH = installedFile('config/emulator-seed.yaml');

const Id = z.string().regex(/^[A-Za-z0-9_.-]{1,128}$/, 'ids use letters, digits, _ . - (1-128 chars)');

export const SeedOrganization = z.strictObject({
  id: Id,
  slug: z.string().regex(/^[a-z0-9]+(?:-[a-z0-9]+)*$/),
  name: z.string().min(1),
  plan: z.enum(PLANS),
  downgraded: z.boolean().default(false),
});

export const SeedMembership = z.strictObject({
  organizationId: Id,
  role: z.enum(['owner', 'admin', 'member']),
});

export const SeedPrincipal = z.strictObject({
  id: Id,
  name: z.string().min(1),
  /** Both kinds authenticate with a bearer token; the kind is informational. */
  kind: z.enum(['oauth', 'session']),
  /** A fixed bearer token (demo and tests only). Principals without one get tokens via /oauth/token. */
  token: z.string().min(8).optional(),
  tokenExpiresAt: z.iso.datetime().optional(),
  activeOrganizationId: Id.optional(),
  memberships: z.array(SeedMembership).min(1),
});

export const SeedOAuthClient = z.strictObject({
  clientId: z.string().min(1),
  clientSecret: z.string().min(8),
  principalId: Id,
  scopes: z.array(z.string().min(1)).default([]),
});

export const SeedApiKey = z.strictObject({
  id: Id,
  name: z.string().min(1),
  organizationId: Id,
  /** The rate the key was minted with; defaults to the organization's current plan rate. */
  rateLimitPerMinute: z.int().nonnegative().optional(),
});

export const SeedProject = z.strictObject({
  id: Id,
  name: z.string().min(1),
  /** Defaults to the slug of the name. */
  slug: z
    .string()
    .regex(/^[a-z0-9]+(?:-[a-z0-9]+)*$/)
    .optional(),
  description: z.string().nullable().default(null),
  organizationId: Id,
  consentInstanceId: Id.nullable().default(null),
});

export const SeedConsentInstance = z.strictObject({
  id: Id,
  name: z.string().min(1),
  slug: z
    .string()
    .regex(/^[a-z0-9]+(?:-[a-z0-9]+)*$/)
    .optional(),
  trustedOrigins: z.array(z.string()).default([]),
  branding: z.enum(['brand_a', 'brand_b', 'none']).default('brand_a'),
  backendURL: z.url().nullable().default(null),
  backendVersion: z.string().min(1).default('1.0.0'),
  /** A locked instance (e.g. a migration in progress) refuses updates with 409 CONFLICT. */
  locked: z.boolean().default(false),
});

export const EmulatorSeed = z.strictObject({
  dashboardBaseURL: z.url().default('https://dashboard.emulator.invalid'),
  oauth: z
    .strictObject({ tokenTtlSeconds: z.int().positive().default(3600) })
    .default({ tokenTtlSeconds: 3600 }),
  organizations: z.array(SeedOrganization).min(1),
  principals: z.array(SeedPrincipal).default([]),
  oauthClients: z.array(SeedOAuthClient).default([]),
  apiKeys: z.array(SeedApiKey).default([]),
  projects: z.array(SeedProject).default([]),
  consentInstances: z.array(SeedConsentInstance).default([]),
});
/** A seed as written (defaults optional). */
export type EmulatorSeed = z.input<typeof EmulatorSeed>;
/** A seed after parsing (defaults filled in). */
export type ParsedEmulatorSeed = z.output<typeof EmulatorSeed>;

/** Parses a seed object or reads one from a YAML/JSON file (default: config/emulator-seed.yaml). */
export async function loadEmulatorSeed(
  source: EmulatorSeed | string = DEFAULT_SEED_PATH,
): Promise<ParsedEmulatorSeed> {
  if (typeof source !== 'string') return parseEmulatorSeed(source, 'object');
  let raw: unknown;
  try {
    raw = parseYaml(await readFile(source, 'utf8'));
  } catch (error) {
    throw new EmulatorSeedError(source, ['cannot be read or is not YAML/JSON'], { cause: error });
  }
  return parseEmulatorSeed(raw, source);
}

export function parseEmulatorSeed(raw: unknown, sourceName: string): ParsedEmulatorSeed {
  const parsed = EmulatorSeed.safeParse(raw);
  if (!parsed.success) {
    throw new EmulatorSeedError(
      sourceName,
      parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`),
    );
  }
  const issues = crossReferenceIssues(parsed.data);
  if (issues.length > 0) throw new EmulatorSeedError(sourceName, issues);
  return parsed.data;
}

/** References between sections must resolve, and ids must be unique. */
function crossReferenceIssues(seed: ParsedEmulatorSeed): string[] {
  const issues: string[] = [];
  const orgIds = uniqueIds(
    'organizations',
    seed.organizations.map((o) => o.id),
    issues,
  );
  const principalIds = uniqueIds(
    'principals',
    seed.principals.map((p) => p.id),
    issues,
  );
  uniqueIds(
    'apiKeys',
    seed.apiKeys.map((k) => k.id),
    issues,
  );
  uniqueIds(
    'projects',
    seed.projects.map((p) => p.id),
    issues,
  );
  const consentIds = uniqueIds(
    'consentInstances',
    seed.consentInstances.map((c) => c.id),
    issues,
  );
  const tokens = seed.principals.flatMap((p) => (p.token === undefined ? [] : [p.token]));
  // Named without the value: even demo tokens are credentials and stay out of messages.
  if (new Set(tokens).size !== tokens.length) issues.push('principals: two principals share a token');
  uniqueIds(
    'oauthClients',
    seed.oauthClients.map((c) => c.clientId),
    issues,
  );

  const needOrg = (where: string, id: string): void => {
    if (!orgIds.has(id)) issues.push(`${where}: unknown organization ${id}`);
  };
  for (const p of seed.principals) {
    for (const m of p.memberships) needOrg(`principals.${p.id}.memberships`, m.organizationId);
    if (
      p.activeOrganizationId !== undefined &&
      !p.memberships.some((m) => m.organizationId === p.activeOrganizationId)
    ) {
      issues.push(`principals.${p.id}.activeOrganizationId: not one of its memberships`);
    }
  }
  for (const c of seed.oauthClients) {
    if (!principalIds.has(c.principalId))
      issues.push(`oauthClients.${c.clientId}: unknown principal ${c.principalId}`);
  }
  for (const k of seed.apiKeys) needOrg(`apiKeys.${k.id}`, k.organizationId);
  const linked = new Set<string>();
  for (const p of seed.projects) {
    needOrg(`projects.${p.id}`, p.organizationId);
    if (p.consentInstanceId === null) continue;
    if (!consentIds.has(p.consentInstanceId))
      issues.push(`projects.${p.id}: unknown consent instance ${p.consentInstanceId}`);
    if (linked.has(p.consentInstanceId))
      issues.push(`projects.${p.id}: consent instance ${p.consentInstanceId} is linked twice`);
    linked.add(p.consentInstanceId);
  }
  return issues;
}

function uniqueIds(section: string, ids: string[], issues: string[]): Set<string> {
  const seen = new Set<string>();
  for (const id of ids) {
    if (seen.has(id)) issues.push(`${section}: duplicate ${JSON.stringify(id)}`);
    seen.add(id);
  }
  return seen;
}
