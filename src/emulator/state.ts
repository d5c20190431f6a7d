// The emulator's world in plain maps: organizations, principals, API keys, projects and consent
// instances, loaded from a seed and changed by the API and by tests. API-key secrets live in a
// private table so that serializing a record can never carry one; tests read them only through
// the methods marked test-only.
import { randomBytes } from 'node:crypto';
import { EmulatorUnknownEntityError } from './errors.ts';
import { API_KEY_RATE_PER_MINUTE, type Plan } from './plans.ts';
import type { ParsedEmulatorSeed } from './seed.ts';
import { slugify } from './slug.ts';

export type Role = 'owner' | 'admin' | 'member';
export type Branding = 'brand_a' | 'brand_b' | 'none';

export interface Organization {
  id: string;
  slug: string;
  name: string;
  plan: Plan;
  downgraded: boolean;
}

export interface Principal {
  id: string;
  name: string;
  kind: 'oauth' | 'session';
  activeOrganizationId: string;
  memberships: { organizationId: string; role: Role }[];
}

export interface ApiKeyRecord {
  id: string;
  name: string;
  organizationId: string;
  /** The rate the current secret was minted with (the plan's rate at mint time). */
  rateLimitPerMinute: number;
  rollCount: number;
}

export interface Project {
  id: string;
  slug: string;
  name: string;
  description: string | null;
  organizationId: string;
  consentInstanceId: string | null;
}

export interface ConsentInstance {
  id: string;
  slug: string;
  name: string;
  trustedOrigins: string[];
  branding: Branding;
  backendURL: string | null;
  backendVersion: string;
  locked: boolean;
}

export interface OAuthClient {
  clientId: string;
  clientSecret: string;
  principalId: string;
  scopes: string[];
}

interface BearerToken {
  principalId: string;
  /** ms since epoch; undefined for fixed seed tokens without an expiry. */
  expiresAt: number | undefined;
}

/** A minted key secret: `kmk_live_` plus 40 base64url chars (240 random bits). */
export function mintSecret(): string {
  return `kmk_live_${randomBytes(30).toString('base64url')}`;
}

export class EmulatorState {
  readonly organizations = new Map<string, Organization>();
  readonly principals = new Map<string, Principal>();
  readonly apiKeys = new Map<string, ApiKeyRecord>();
  readonly projects = new Map<string, Project>();
  readonly consentInstances = new Map<string, ConsentInstance>();
  readonly oauthClients = new Map<string, OAuthClient>();
  readonly dashboardBaseURL: string;
  readonly tokenTtlSeconds: number;

  readonly #now: () => number;
  /** keyId → its current secret and whether that secret still works. */
  readonly #secrets = new Map<string, { value: string; live: boolean }>();
  /** live secret → keyId, for authenticating API-key callers. */
  readonly #keyBySecret = new Map<string, string>();
  readonly #minted: string[] = [];
  readonly #tokens = new Map<string, BearerToken>();
  readonly #calls = new Map<string, number>();

  constructor(seed: ParsedEmulatorSeed, now: () => number = Date.now) {
    this.#now = now;
    this.dashboardBaseURL = seed.dashboardBaseURL.replace(/\/+$/, '');
    this.tokenTtlSeconds = seed.oauth.tokenTtlSeconds;
    for (const org of seed.organizations) this.organizations.set(org.id, { ...org });
    for (const p of seed.principals) {
      const firstOrg = p.memberships[0]?.organizationId ?? '';
      this.principals.set(p.id, {
        id: p.id,
        name: p.name,
        kind: p.kind,
        activeOrganizationId: p.activeOrganizationId ?? firstOrg,
        memberships: p.memberships.map((m) => ({ ...m })),
      });
      if (p.token !== undefined) {
        const expiresAt = p.tokenExpiresAt === undefined ? undefined : Date.parse(p.tokenExpiresAt);
        this.#tokens.set(p.token, { principalId: p.id, expiresAt });
      }
    }
    for (const c of seed.oauthClients) this.oauthClients.set(c.clientId, { ...c, scopes: [...c.scopes] });
    for (const c of seed.consentInstances) {
      this.consentInstances.set(c.id, {
        ...c,
        slug: c.slug ?? slugify(c.name),
        trustedOrigins: [...c.trustedOrigins],
      });
    }
    for (const p of seed.projects) this.projects.set(p.id, { ...p, slug: p.slug ?? slugify(p.name) });
    for (const k of seed.apiKeys) this.addApiKey(k);
  }

  // ── organizations ────────────────────────────────────────────────────────────

  organization(orgId: string): Organization {
    const org = this.organizations.get(orgId);
    if (org === undefined) throw new EmulatorUnknownEntityError('organization', orgId);
    return org;
  }

  setPlan(orgId: string, plan: Plan): void {
    this.organization(orgId).plan = plan;
  }

  /** A downgraded organization gets 402 on API-key calls and rolls until restored. */
  setDowngraded(orgId: string, downgraded: boolean): void {
    this.organization(orgId).downgraded = downgraded;
  }

  // ── API keys ─────────────────────────────────────────────────────────────────

  apiKey(keyId: string): ApiKeyRecord {
    const key = this.apiKeys.get(keyId);
    if (key === undefined) throw new EmulatorUnknownEntityError('API key', keyId);
    return key;
  }

  /** Adds a key with a fresh secret; returns the secret (tests use it as a credential). */
  addApiKey(input: { id?: string; name: string; organizationId: string; rateLimitPerMinute?: number }): {
    id: string;
    secret: string;
  } {
    const org = this.organization(input.organizationId);
    const id = input.id ?? `key_${randomBytes(8).toString('hex')}`;
    this.apiKeys.set(id, {
      id,
      name: input.name,
      organizationId: org.id,
      rateLimitPerMinute: input.rateLimitPerMinute ?? API_KEY_RATE_PER_MINUTE[org.plan],
      rollCount: 0,
    });
    return { id, secret: this.#installSecret(id) };
  }

  /**
   * Replaces the key's secret: the old one stops working at once, the new one carries the
   * current plan's rate. Returns the new secret (the only time it is handed out).
   */
  rollKey(keyId: string): string {
    const key = this.apiKey(keyId);
    key.rateLimitPerMinute = API_KEY_RATE_PER_MINUTE[this.organization(key.organizationId).plan];
    key.rollCount += 1;
    return this.#installSecret(keyId);
  }

  /** Kills the current secret without minting a new one, as a provider may do after a leak. */
  revokeKey(keyId: string): void {
    this.apiKey(keyId);
    const current = this.#secrets.get(keyId);
    if (current === undefined) return;
    current.live = false;
    this.#keyBySecret.delete(current.value);
  }

  /** The key a live secret belongs to, or undefined for a dead or unknown secret. */
  keyForSecret(secret: string): ApiKeyRecord | undefined {
    const keyId = this.#keyBySecret.get(secret);
    return keyId === undefined ? undefined : this.apiKeys.get(keyId);
  }

  rollCount(keyId: string): number {
    return this.apiKey(keyId).rollCount;
  }

  totalRolls(): number {
    let total = 0;
    for (const key of this.apiKeys.values()) total += key.rollCount;
    return total;
  }

  /** Test-only: the key's current secret (dead after revokeKey). Never sent over HTTP. */
  currentSecret(keyId: string): string {
    this.apiKey(keyId);
    const current = this.#secrets.get(keyId);
    if (current === undefined) throw new EmulatorUnknownEntityError('API key secret', keyId);
    return current.value;
  }

  isLiveSecret(keyId: string, secret: string): boolean {
    return this.#keyBySecret.get(secret) === keyId;
  }

  /** Test-only: every secret minted since start (seeded, added, rolled), for leak scans. */
  mintedSecrets(): string[] {
    return [...this.#minted];
  }

  #installSecret(keyId: string): string {
    const previous = this.#secrets.get(keyId);
    if (previous !== undefined) this.#keyBySecret.delete(previous.value);
    const value = mintSecret();
    this.#secrets.set(keyId, { value, live: true });
    this.#keyBySecret.set(value, keyId);
    this.#minted.push(value);
    return value;
  }

  // ── principals and tokens ────────────────────────────────────────────────────

  addPrincipal(input: {
    id: string;
    name?: string;
    kind?: 'oauth' | 'session';
    memberships: { organizationId: string; role: Role }[];
    token?: string;
  }): Principal {
    for (const m of input.memberships) this.organization(m.organizationId);
    const principal: Principal = {
      id: input.id,
      name: input.name ?? input.id,
      kind: input.kind ?? 'oauth',
      activeOrganizationId: input.memberships[0]?.organizationId ?? '',
      memberships: input.memberships.map((m) => ({ ...m })),
    };
    this.principals.set(principal.id, principal);
    if (input.token !== undefined)
      this.#tokens.set(input.token, { principalId: principal.id, expiresAt: undefined });
    return principal;
  }

  /** Issues a bearer token for the principal, valid for `ttlSeconds` from now. */
  issueAccessToken(
    principalId: string,
    ttlSeconds: number = this.tokenTtlSeconds,
  ): { token: string; expiresAt: number } {
    if (!this.principals.has(principalId)) throw new EmulatorUnknownEntityError('principal', principalId);
    const token = `kmo_at_${randomBytes(24).toString('base64url')}`;
    const expiresAt = this.#now() + ttlSeconds * 1000;
    this.#tokens.set(token, { principalId, expiresAt });
    return { token, expiresAt };
  }

  /** The principal behind a bearer token; `expired` when it existed but its time is up. */
  principalForToken(token: string): { principal: Principal } | { expired: true } | undefined {
    const entry = this.#tokens.get(token);
    if (entry === undefined) return undefined;
    if (entry.expiresAt !== undefined && entry.expiresAt <= this.#now()) return { expired: true };
    const principal = this.principals.get(entry.principalId);
    return principal === undefined ? undefined : { principal };
  }

  // ── projects ─────────────────────────────────────────────────────────────────

  project(projectId: string): Project {
    const project = this.projects.get(projectId);
    if (project === undefined) throw new EmulatorUnknownEntityError('project', projectId);
    return project;
  }

  addProject(input: {
    id: string;
    name: string;
    organizationId: string;
    description?: string | null;
    consentInstanceId?: string | null;
  }): Project {
    this.organization(input.organizationId);
    const project: Project = {
      id: input.id,
      slug: slugify(input.name),
      name: input.name,
      description: input.description ?? null,
      organizationId: input.organizationId,
      consentInstanceId: input.consentInstanceId ?? null,
    };
    this.projects.set(project.id, project);
    return project;
  }

  // ── call counts ──────────────────────────────────────────────────────────────

  recordCall(operation: string): void {
    this.#calls.set(operation, (this.#calls.get(operation) ?? 0) + 1);
  }

  /** How many requests reached an operation (including refused and fault-injected ones). */
  callCount(operation: string): number {
    return this.#calls.get(operation) ?? 0;
  }
}
