// Does a leaked value that keyroll found still need a rotation? The one question the daemon's leak
// intake and `keyroll rotate --leaked-secret-stdin` both ask, so the two ways in never disagree.
//
// A value found as a destination's *previous* value usually died when the key (or slot) was last
// rolled: an alert that arrives after its leak rotation finished, a responder pasting a value
// that was already rotated away, or a slot entry's previous value after a leak of its active slot
// (that slot's own old value, not the standby's). Rolling again then would cut consumers off for
// nothing. So a previous value is probed quietly first (the API answers 401 to a dead value), and
// only a value the API does not refuse is rotated: after an ordinary alternation a slot entry's
// previous value is the live standby (invariant 10), and a probe that says nothing (network, 5xx)
// leaves the rotation on. A current value is always rotated.
import type { Secret } from '../audit/secret.ts';
import type { Runtime } from '../rotation/runtime.ts';
import type { LeakMatch } from './identify.ts';
import { probeLeakedSecret } from './proof.ts';

export async function needsLeakRotation(runtime: Pick<Runtime, 'api'>, match: Pick<LeakMatch, 'key' | 'which'>, leaked: Secret): Promise<boolean> {
  if (match.which === 'current') return true;
  return (await probeLeakedSecret(runtime, leaked, match.key.organizationId)).verdict !== 'refused';
}
