// The one place a key's outcome is put together (types.ts, KeyOutcome): what every outcome says
// about its key (OutcomeFacts) and how it ended (OutcomeEnd), so each variant keeps its shape: a
// skip names a SkipReason, a failure a step and a catalogue code.
import type { KeyPolicy } from '../policy/public/schema.ts';
import type { KeyOutcome, OutcomeEnd, OutcomeFacts } from './types.ts';

export function keyOutcome(facts: OutcomeFacts, end: OutcomeEnd): KeyOutcome {
  return { ...facts, ...end };
}

/** The facts of a key that no rotation started for (nothing rolled, no time spent). */
export function notStartedFacts(key: Pick<KeyPolicy, 'id' | 'organizationId'>): OutcomeFacts {
  return { keyId: key.id, organizationId: key.organizationId, durationMs: 0, rolls: 0 };
}

/** An outcome's facts without how it ended: the start of a new end for the same key. */
export function factsOf(outcome: KeyOutcome): OutcomeFacts {
  // eslint-disable-next-line @typescript-eslint/no-unused-vars -- the end is dropped on purpose
  const { result, detail, step, errorCode, ...facts } = outcome;
  return facts;
}
