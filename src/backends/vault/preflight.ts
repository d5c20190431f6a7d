// The Vault preflight (invariant 1): the token works (lookup-self), the secret is readable (the
// verify step and recovery read it back), and sys/capabilities-self says the token may do what the
// rotation will do on the secret's data and metadata paths and on the lock entry: a write, the
// read-back or the bookkeeping that would be denied is refused here, before the roll. A policy that
// grants only what is needed (config/vault-policy.hcl) passes; anything narrower fails here, not
// after the old secret has died.
import { BackendError } from '../errors.ts';
import type { PreflightResult } from '../types.ts';
import type { PathKnowledgeMap } from './known.ts';
import type { KvV2 } from './kv.ts';
import { lockPathFor } from './lock.ts';

export interface PreflightContext {
  backend: string;
  kv: KvV2;
  known: PathKnowledgeMap;
}

/** Proves `path` writable without writing; the version it read is the check-and-set base of the first write. */
export async function preflight(context: PreflightContext, path: string): Promise<PreflightResult> {
  const { kv, backend } = context;
  const token = await kv.tokenLookup('preflight', path);
  const checks = [
    `token valid (policies: ${token.policies.join(', ') || 'none'}; ttl ${token.ttl === 0 ? 'none' : `${String(token.ttl)}s`})`,
  ];
  // The read proves the secret readable (the verify step and recovery read it back) and gives
  // its current version. An answer with a version means a metadata entry exists too; a plain 404
  // leaves that open (an entry with only custom_metadata answers the same).
  const current = await kv.readData(path, 'preflight');
  const exists = current !== undefined && current.data !== undefined;
  checks.push(
    ...(await checkCapabilities(kv, path, { exists, metadataExists: current !== undefined, backend })),
  );
  context.known.of(path).preflightRead(current === undefined ? undefined : current.version);
  checks.push(
    current !== undefined && exists
      ? `read ${kv.apiPath('data', path)} (version ${String(current.version)})`
      : `${kv.apiPath('data', path)} does not exist yet`,
  );
  return { exists, checks };
}

interface CapabilityContext {
  /** The secret has a live version: a write is an update. Otherwise it is a create. */
  exists: boolean;
  /**
   * The metadata entry is known to exist: keyroll's custom_metadata writes are updates. False
   * (none, or not known): the first may be a create (the intent marker), the later ones updates.
   */
  metadataExists: boolean;
  backend: string;
}

function allows(granted: string[], needed: string): boolean {
  if (granted.includes('deny')) return false;
  return granted.includes('root') || granted.includes(needed);
}

/** Returns the facts proven; throws KR_BACKEND_DENIED naming every missing capability. */
async function checkCapabilities(kv: KvV2, path: string, context: CapabilityContext): Promise<string[]> {
  const dataPath = kv.apiPath('data', path);
  const metadataPath = kv.apiPath('metadata', path);
  const lockPath = kv.apiPath('data', lockPathFor(path));
  const needs: [string, string[]][] = [
    [dataPath, ['read', context.exists ? 'update' : 'create']],
    // The intent marker creates the entry when it is missing; the finish step then updates it.
    [metadataPath, ['read', ...(context.metadataExists ? [] : ['create']), 'update']],
    // The lock entry is created once and updated on every later acquire and release.
    [lockPath, ['read', 'create', 'update']],
  ];
  const granted = await kv.capabilities(
    needs.map(([apiPath]) => apiPath),
    'preflight',
    path,
  );
  const missing: string[] = [];
  const proven: string[] = [];
  for (const [apiPath, capabilities] of needs) {
    const have = granted[apiPath] ?? [];
    const lacking = capabilities.filter((c) => !allows(have, c));
    if (lacking.length > 0) missing.push(`${lacking.join('+')} on ${apiPath}`);
    else proven.push(`${capabilities.join('+')} on ${apiPath}`);
  }
  if (missing.length > 0) {
    throw new BackendError(
      'KR_BACKEND_DENIED',
      `vault backend ${context.backend}: preflight of ${path} failed, the token lacks ${missing.join(', ')}`,
      {
        backend: context.backend,
        kind: 'vault',
        operation: 'preflight',
        path,
      },
    );
  }
  return proven;
}
