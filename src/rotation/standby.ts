// The standby slot of a two-slot entry, as far as its primary destination keeps it (invariant
// 10). After an alternation the value stored before the current one (readPrevious) is the standby's
// secret, which consumers that have not refreshed yet still use. After a rotation that rolled the
// active slot itself (a leak, a drift heal) it is that slot's old, killed secret instead: a stored
// value that names its key (json shapes with `keyId`, the default) tells the two apart; one that
// does not is taken for the standby's, and whatever keyroll does about it must then be safe either
// way (the heal waits for consumerRefresh, as any roll of the standby does).
import type { SecretStore, StoreTarget, StoredSecret } from '../backends/public/types.ts';
import { errorCode } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { standbySlot } from './slots.ts';

/** What a probe of the standby found; `not-kept`: the backend keeps no value of it to probe. */
export type StandbyVerdict = 'works' | 'dead' | 'not-kept' | 'probe-failed';

export interface StandbyProbe {
  /** The standby slot's API key id. */
  keyId: string;
  verdict: StandbyVerdict;
  /** The probed value names the standby slot as its key, so the verdict is certainly the standby's. */
  certain: boolean;
  errorCode?: string;
}

/**
 * The standby's value kept at `primary`, or undefined when there is none to probe: the backend
 * keeps no earlier value, there was none, it equals the current one (a write repeated by hand), or
 * it names another key (the active slot's killed secret after that slot was rolled).
 */
export async function readStandbyValue(
  primary: { backend: SecretStore; target: StoreTarget },
  stored: StoredSecret | undefined,
  standbyId: string,
): Promise<{ value: StoredSecret; certain: boolean } | undefined> {
  if (primary.backend.readPrevious === undefined) return undefined;
  const previous = await primary.backend.readPrevious(primary.target);
  if (previous === undefined || (stored !== undefined && previous.secret.equals(stored.secret)))
    return undefined;
  if (previous.keyId !== undefined && previous.keyId !== standbyId) return undefined;
  return { value: previous, certain: previous.keyId === standbyId };
}

/** Probes the standby of `key` against the API with its own secret; never throws. */
export async function probeStandby(
  key: Pick<KeyPolicy, 'organizationId'> & { slots: readonly [string, string] },
  primary: { backend: SecretStore; target: StoreTarget },
  state: { lastKeyId?: string },
  stored: StoredSecret | undefined,
  probe: (secret: StoredSecret['secret'], organizationId: string) => Promise<'valid' | 'invalid'>,
): Promise<StandbyProbe> {
  const keyId = standbySlot(key.slots, state);
  try {
    const kept = await readStandbyValue(primary, stored, keyId);
    if (kept === undefined) return { keyId, verdict: 'not-kept', certain: false };
    const answer = await probe(kept.value.secret, key.organizationId);
    return { keyId, verdict: answer === 'valid' ? 'works' : 'dead', certain: kept.certain };
  } catch (error) {
    return { keyId, verdict: 'probe-failed', certain: false, errorCode: errorCode(error) };
  }
}
