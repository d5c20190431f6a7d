// The primary destination of a native rotation (src/lambda/) as the rotation engine sees it: the
// AWS backend itself for everything (preflight, lock, intent, records), except that the write after
// the roll goes to AWSPENDING under the event's ClientRequestToken (native/rotation.ts) instead of moving
// AWSCURRENT. The engine's roll-then-store step stays the one implementation (invariant 2: the put
// is the first I/O after the roll answer); finishSecret moves AWSCURRENT later, under the key lock
// (invariant 9: a runner that lost its lock leaves only an AWSPENDING version nobody reads).
import { renderText } from '../../render.ts';
import type { Backend, SecretRecord, StoreTarget, WriteReservation, WriteResult } from '../../types.ts';
import type { AwsNativeRotation } from './rotation.ts';

export function pendingDestinationBackend(inner: Backend, native: AwsNativeRotation, token: string): Backend {
  const overrides: Pick<Backend, 'writeSecret' | 'reserveWrite'> = {
    // Invariants 2 and 8: one PutSecretValue labelled AWSPENDING with the event's token; no fence read before it.
    writeSecret: (target: StoreTarget, record: SecretRecord): Promise<WriteResult> =>
      native.putPending(target.path, renderText(target.shape, record), token),
    // One put, never a stage move: the unfenced write's budget.
    reserveWrite: async (target: StoreTarget): Promise<WriteReservation> =>
      (await inner.reserveWrite?.(target, { fenced: false })) ?? {
        use: (calls) => calls(),
        release: () => undefined,
      },
  };
  return new Proxy(inner, {
    get(target, property, receiver) {
      if (property === 'writeSecret' || property === 'reserveWrite') return overrides[property];
      const value: unknown = Reflect.get(target, property, receiver);
      // The backend's own methods run on the backend (its private fields), not on the proxy.
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
