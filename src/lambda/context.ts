// What one invocation of the rotation function works with: the policy's entry for the secret
// Secrets Manager names, its AWS destination (the backend and its staging-label calls), the
// engine's dependencies, and the lock owner of this rotation. The owner and the rotation id are
// derived from the event's ClientRequestToken, so every step of one rotation, in whichever
// Lambda instance AWS runs it, holds the same lock and names the same intent marker.
import type { AuditLog } from '../audit/public/events.ts';
import type { NativeRotation } from '../backends/public/native.ts';
import type { KeyPolicy, Policy } from '../policy/public/schema.ts';
import { deferAlerts, type DeferredAlerts } from '../rotation/public/deferred-alerts.ts';
import { createRuntime, type Runtime, type RuntimeOptions } from '../rotation/public/runtime.ts';
import type { ResolvedDestination, RotationDeps } from '../rotation/public/types.ts';
import { NativeRotationError } from './errors.ts';
import type { RotationEvent } from './event.ts';

export interface NativeContext {
  key: KeyPolicy;
  /** The AWS secret, through the real backend (lock, intent, records, AWSCURRENT). */
  primary: ResolvedDestination;
  native: NativeRotation;
  fallbacks: ResolvedDestination[];
  runtime: Runtime;
  /** The key's audit log: every line carries the key and the rotation id (= the token). */
  audit: AuditLog;
  /** The engine's dependencies, alerts held until the invocation ends (after the lock is given back). */
  deps: RotationDeps;
  deferred: DeferredAlerts;
  event: RotationEvent;
  /** The event's ClientRequestToken: the version id of the new value and the rotation id. */
  token: string;
}

/** The lock owner of one native rotation: the same in every step and every Lambda instance. */
export function nativeOwner(token: string): string {
  return `aws-rotation/${token}`;
}

/** Opens the context of `key`, the entry the event's secret names (secret-location.ts: nativeKeyFor). */
export async function openNativeContext(
  policy: Policy,
  key: KeyPolicy,
  event: RotationEvent,
  audit: AuditLog,
  runtimeOptions: Partial<RuntimeOptions> = {},
): Promise<NativeContext> {
  const runtime = await createRuntime(policy, { audit, ...runtimeOptions });
  const { fallbacks, primary } = runtime.resolveKey(key);
  // The AWS backend, or a wrapper of it (tests, metrics) that keeps its port.
  const native = primary.backend.native;
  if (native === undefined) {
    await runtime.close();
    throw new NativeRotationError(
      'KR_NATIVE_NOT_CONFIGURED',
      `key ${key.id}: aws-native needs an aws destination (keyroll validate says why)`,
    );
  }
  const token = event.ClientRequestToken;
  const keyAudit = audit.child({ rotationId: token, keyId: key.id, organizationId: key.organizationId });
  const deferred = deferAlerts({
    ...runtime.rotationDeps(keyAudit),
    owner: nativeOwner(token),
    newRotationId: () => token,
  });
  return {
    key,
    primary,
    native,
    fallbacks,
    runtime,
    audit: keyAudit,
    deps: deferred.deps,
    deferred,
    event,
    token,
  };
}
