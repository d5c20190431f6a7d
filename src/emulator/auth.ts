// Who is calling: an organization API key (its live secret as the bearer token) or an OAuth /
// session principal (a bearer token from the seed or /oauth/token). Refusals never quote the
// token, so a caller's credential cannot end up in a log through an error body.
import { EmulatorRequestError } from './errors.ts';
import type { EmulatorState, Organization, Principal, Role } from './state.ts';

export type Caller =
  | { kind: 'apiKey'; keyId: string; organizationId: string; rateLimitPerMinute: number }
  | { kind: 'principal'; principal: Principal };

export function authenticate(authorization: string | undefined, state: EmulatorState): Caller {
  if (authorization === undefined || authorization.trim() === '') {
    throw new EmulatorRequestError(401, 'Authentication is required: send an Authorization: Bearer header.');
  }
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(authorization);
  const token = match?.[1];
  if (token === undefined)
    throw new EmulatorRequestError(401, 'The Authorization header must use the Bearer scheme.');
  const key = state.keyForSecret(token);
  if (key !== undefined) {
    return {
      kind: 'apiKey',
      keyId: key.id,
      organizationId: key.organizationId,
      rateLimitPerMinute: key.rateLimitPerMinute,
    };
  }
  const found = state.principalForToken(token);
  if (found === undefined) throw new EmulatorRequestError(401, 'The bearer credential is invalid.');
  if ('expired' in found) throw new EmulatorRequestError(401, 'The bearer credential has expired.');
  return { kind: 'principal', principal: found.principal };
}

/** The caller's role in an organization, or undefined when it has none. API keys act as their organization. */
export function roleIn(caller: Caller, organizationId: string): Role | 'apiKey' | undefined {
  if (caller.kind === 'apiKey') return caller.organizationId === organizationId ? 'apiKey' : undefined;
  return caller.principal.memberships.find((m) => m.organizationId === organizationId)?.role;
}

/** Organizations whose resources the caller can see. */
export function visibleOrganizationIds(caller: Caller): string[] {
  if (caller.kind === 'apiKey') return [caller.organizationId];
  return caller.principal.memberships.map((m) => m.organizationId);
}

/** The caller's active organization (an API key's own, or the principal's active one). */
export function activeOrganizationId(caller: Caller): string {
  return caller.kind === 'apiKey' ? caller.organizationId : caller.principal.activeOrganizationId;
}

export function describeOrg(org: Organization): Record<string, unknown> {
  return { organizationId: org.id, plan: org.plan, downgraded: org.downgraded };
}
