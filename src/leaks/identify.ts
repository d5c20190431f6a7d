// Which key is this? A responder holds a leaked *value* (from a scanner alert, a log line, a
// paste), not a key id. keyroll finds the policy entry by comparing the SHA-256 digest of that
// value with the digest of what each destination holds now (`readSecret`) and held before
// (`readPrevious`, where the backend keeps it): the value itself is compared only as a digest,
// and only fingerprints ever leave this module (invariant 3).
import { withSecretScope } from '../audit/public/sanitize.ts';
import type { Secret } from '../audit/public/secret.ts';
import type { KeyState, StoredSecret } from '../backends/public/types.ts';
import { errorCode } from '../errors.ts';
import type { KeyPolicy, Policy } from '../policy/public/schema.ts';
import { mapWithConcurrency } from '../rotation/public/concurrency.ts';
import type { Runtime } from '../rotation/public/runtime.ts';
import { activeSlot, standbySlot } from '../rotation/public/slots.ts';
import type { ResolvedDestination } from '../rotation/public/types.ts';

export interface LeakMatch {
  key: KeyPolicy;
  /**
   * Two-slot entries: the slot whose secret the leaked value is. The current value belongs to the
   * active slot; the previous one to the other slot (after an alternation, the standby's).
   */
  slot?: string;
  /** Where the value was found (a destination or a fallback of the key). */
  destination: ResolvedDestination;
  which: 'current' | 'previous';
}

/** A destination that could not be read: the leaked value may be there, unseen. */
export interface UnreadDestination {
  keyId: string;
  backend: string;
  path: string;
  errorCode: string;
}

export interface LeakSearch {
  /** One match per entry (a current match wins over a previous one), in policy order. */
  matches: LeakMatch[];
  unread: UnreadDestination[];
  /** How many destinations were read (current value, and the previous one where kept). */
  searched: number;
}

/** How many keys are read at once: destinations are remote stores with their own rate limits. */
const READ_CONCURRENCY = 8;

/**
 * Reads every destination and fallback of every key and compares digests with `leaked`. A
 * destination that cannot be read is reported, not thrown: one unreachable store must not hide a
 * match in the others. Read-only and lock-free; the secrets read are forgotten by the sanitizer
 * once their key is done (the leaked value itself stays registered: the caller made it).
 */
export async function searchLeakedSecret(
  policy: Policy,
  runtime: Pick<Runtime, 'resolveKey'>,
  leaked: Secret,
): Promise<LeakSearch> {
  const wanted = leaked.digest();
  const unread: UnreadDestination[] = [];
  let searched = 0;
  const perKey = await mapWithConcurrency(policy.keys, READ_CONCURRENCY, (key) =>
    withSecretScope(async (): Promise<LeakMatch | undefined> => {
      const { destinations, fallbacks, primary } = runtime.resolveKey(key);
      const found: { destination: ResolvedDestination; which: LeakMatch['which'] }[] = [];
      for (const destination of [...destinations, ...fallbacks]) {
        const miss = (error: unknown): undefined => {
          unread.push({
            keyId: key.id,
            backend: destination.backendName,
            path: destination.target.path,
            errorCode: errorCode(error),
          });
          return undefined;
        };
        const current = await destination.backend.readSecret(destination.target).catch(miss);
        searched++;
        if (holds(current, wanted)) {
          found.push({ destination, which: 'current' });
          continue;
        }
        if (destination.backend.readPrevious === undefined) continue;
        const previous = await destination.backend.readPrevious(destination.target).catch(miss);
        searched++;
        if (holds(previous, wanted)) found.push({ destination, which: 'previous' });
      }
      const best = found.find((f) => f.which === 'current') ?? found[0];
      if (best === undefined) return undefined;
      if (key.slots === undefined) return { key, ...best };
      // The engine reads the active slot from the primary's bookkeeping; so does this.
      let state: Pick<KeyState, 'lastKeyId'>;
      try {
        state = await primary.backend.readState(primary.target);
      } catch (error) {
        unread.push({
          keyId: key.id,
          backend: primary.backendName,
          path: primary.target.path,
          errorCode: errorCode(error),
        });
        // Without the record the slot is unknown. A current match is still reported without a
        // slot (a leak rotation of the entry rolls its active slot, the one that holds the current
        // value); a previous match cannot be placed and stays unmatched.
        return best.which === 'current' ? { key, ...best } : undefined;
      }
      return {
        key,
        ...best,
        slot: best.which === 'current' ? activeSlot(key.slots, state) : standbySlot(key.slots, state),
      };
    }),
  );
  return { matches: perKey.filter((match) => match !== undefined), unread, searched };
}

function holds(stored: StoredSecret | undefined, digest: string): boolean {
  return stored !== undefined && stored.secret.digest() === digest;
}
