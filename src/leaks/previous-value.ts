// Does a leaked value that keyroll found still need a rotation? The one question the daemon's leak
// intake and `keyroll rotate --leaked-secret-stdin` both ask, so the two ways in never disagree.
//
// A leak is rotated once: a value the API already refuses (401) is dead, and rolling its key again
// would only kill the value consumers are being moved onto. So the leaked value is probed quietly
// before any roll, whichever way it was found:
// - as a destination's *previous* value, it usually died when the key (or slot) was last rolled:
//   an alert that arrives after its leak rotation finished, a responder pasting a value that was
//   already rotated away, or a slot entry's previous value after a leak of its active slot;
// - as the *current* value, it may still have died: another alert's rotation (in another process,
//   or one whose destinations were read before that rotation stored) or a roll by hand in the
//   dashboard already killed it.
// Only a value the API does not refuse is rotated: after an ordinary alternation a slot entry's
// previous value is the live standby (invariant 10), and a probe that says nothing (network, 5xx)
// leaves the rotation on.
import type { Secret } from '../audit/public/secret.ts';
import type { Runtime } from '../rotation/public/runtime.ts';
import type { LeakMatch } from './identify.ts';
import { probeLeakedSecret } from './proof.ts';

export async function needsLeakRotation(
  runtime: Pick<Runtime, 'api'>,
  match: Pick<LeakMatch, 'key'>,
  leaked: Secret,
): Promise<boolean> {
  return (await probeLeakedSecret(runtime, leaked, match.key.organizationId)).verdict !== 'refused';
}
