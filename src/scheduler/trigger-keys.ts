// The trigger's keys: one per caller, given as `--trigger-key NAME=REF` (REF is env:NAME or
// file:/path, never the key). The caller's name is the actor of every rotation it starts, so a
// key is an identity, not a shared password: revoke one caller by removing its key.
import type { Secret } from '../audit/public/secret.ts';
import { UsageError } from '../errors.ts';
import { MIN_SIGNING_KEY_BYTES, signingKeyTooShort } from '../inbound/public/signature.ts';
import { resolveRef, SecretRef } from '../refs/public/secret-ref.ts';
import { CALLER_NAME, type TriggerKeyLookup } from './trigger-auth.ts';

export interface TriggerKeySpec {
  caller: string;
  ref: string;
}

/** Parses `NAME=REF` entries; a repeated caller name or a literal value is refused. */
export function parseTriggerKeys(entries: readonly string[]): TriggerKeySpec[] {
  const specs: TriggerKeySpec[] = [];
  for (const entry of entries) {
    const at = entry.indexOf('=');
    const caller = at < 0 ? '' : entry.slice(0, at).trim();
    const ref = at < 0 ? '' : entry.slice(at + 1).trim();
    // The text is never echoed back: a mistyped entry could be a literal key.
    if (!CALLER_NAME.test(caller)) {
      throw new UsageError(
        '--trigger-key must be NAME=REF with a caller NAME of letters, digits and . _ @ - (at most 64), e.g. alice=file:/var/run/secrets/keyroll/trigger/alice',
      );
    }
    if (!SecretRef.safeParse(ref).success) {
      throw new UsageError(
        `--trigger-key ${caller}=...: the key must be a reference like env:NAME or file:/absolute/path, never the key itself`,
      );
    }
    if (specs.some((spec) => spec.caller === caller))
      throw new UsageError(`--trigger-key: caller ${caller} is given twice`);
    specs.push({ caller, ref });
  }
  return specs;
}

/** The shortest trigger key accepted, in bytes (issue 12): every signed endpoint's minimum. */
export const MIN_TRIGGER_KEY_BYTES = MIN_SIGNING_KEY_BYTES;

/** Reads every caller's key (at start and on SIGHUP); any unreadable or short one fails the whole set. */
export async function resolveTriggerKeys(
  specs: readonly TriggerKeySpec[],
  env: NodeJS.ProcessEnv,
): Promise<ReadonlyMap<string, Secret>> {
  const keys = new Map<string, Secret>();
  for (const spec of specs) {
    const key = await resolveRef(spec.ref, env);
    if (signingKeyTooShort(key)) {
      throw new UsageError(
        `--trigger-key ${spec.caller}=${spec.ref}: the key is shorter than ${String(MIN_TRIGGER_KEY_BYTES)} bytes; use at least ${String(MIN_TRIGGER_KEY_BYTES)} random bytes (e.g. openssl rand -hex 32)`,
      );
    }
    keys.set(spec.caller, key);
  }
  return keys;
}

export function lookupIn(keys: ReadonlyMap<string, Secret>): TriggerKeyLookup {
  // Own entries of a Map only: no caller name can reach a prototype property.
  return (caller) => keys.get(caller);
}
