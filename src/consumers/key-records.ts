// What a pick-up of owed restarts (pick-up.ts) checks each entry's rotation against: the key's
// last rotation as its record in the primary destination says, read and trusted as every other
// reader of a key's state reads it (rotation/trusted-state.ts). Read without the key's lock: an
// owed entry is written after its rotation finished, so the record already names it.
import type { KeyPolicy } from '../policy/public/schema.ts';
import type { Runtime } from '../rotation/public/runtime.ts';
import { readTrustedState } from '../rotation/public/trusted-state.ts';
import type { KeyRecords } from './pick-up.ts';

export function keyRecordsOf(runtime: Pick<Runtime, 'resolveKey'>, now: () => Date): KeyRecords {
  return async (key: KeyPolicy) => {
    const { primary } = runtime.resolveKey(key);
    const state = await readTrustedState({ backend: primary.backend, target: primary.target }, key, now());
    return { lastRotationId: state.lastRotationId, lastRotatedAt: state.lastRotatedAt };
  };
}
