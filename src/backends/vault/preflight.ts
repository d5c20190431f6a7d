// The capability half of the Vault preflight (invariant 1): asks sys/capabilities-self what the
// token may do on the secret's data and metadata paths and on the lock entry, and refuses before
// the roll when a write, the read-back or the bookkeeping would be denied. A policy that grants
// only what is needed (config/vault-policy.hcl) passes; anything narrower fails here, not after
// the old secret has died.
import { BackendError } from '../errors.ts';
import type { KvV2 } from './kv.ts';
import { lockPathFor } from './lock.ts';

export interface CapabilityContext {
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
export async function checkCapabilities(kv: KvV2, path: string, context: CapabilityContext): Promise<string[]> {
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
    throw new BackendError('KR_BACKEND_DENIED', `vault backend ${context.backend}: preflight of ${path} failed, the token lacks ${missing.join(', ')}`, {
      backend: context.backend,
      kind: 'vault',
      operation: 'preflight',
      path,
    });
  }
  return proven;
}
