// What one invocation of the rotation function works with: the policy's entry for the secret
// Secrets Manager names, its AWS destination (the backend and its staging-label calls), the
// engine's dependencies, and the lock owner of this rotation. The owner and the rotation id are
// derived from the event's ClientRequestToken, so every step of one rotation, in whichever
// Lambda instance AWS runs it, holds the same lock and names the same intent marker.
import type { AuditLog } from '../audit/events.ts';
import type { AwsBackend } from '../backends/aws/backend.ts';
import type { Backend } from '../backends/types.ts';
import type { AwsNativeRotation } from '../backends/aws/pending.ts';
import type { KeyPolicy, Policy } from '../policy/schema.ts';
import { deferAlerts, type DeferredAlerts } from '../rotation/deferred-alerts.ts';
import { createRuntime, type Runtime, type RuntimeOptions } from '../rotation/runtime.ts';
import type { ResolvedDestination, RotationDeps } from '../rotation/types.ts';
import { NativeRotationError } from './errors.ts';
import type { RotationEvent } from './event.ts';

export interface NativeContext {
  key: KeyPolicy;
  /** The AWS secret, through the real backend (lock, intent, records, AWSCURRENT). */
  primary: ResolvedDestination;
  native: AwsNativeRotation;
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

/**
 * The secret's name in an ARN (`arn:aws:secretsmanager:<region>:<account>:secret:<name>-<6 chars>`),
 * or undefined when `id` is not a Secrets Manager secret ARN.
 */
export function nameInArn(id: string): string | undefined {
  const match = /^arn:[^:]+:secretsmanager:[^:]*:[^:]*:secret:(.+)-[A-Za-z0-9]{6}$/.exec(id);
  return match?.[1];
}

/** The aws-native entry whose destination is the secret `secretId` names (an ARN, or a name). */
export function findNativeKey(policy: Policy, secretId: string): KeyPolicy | undefined {
  const name = nameInArn(secretId);
  return policy.keys.find((key) => {
    const path = key.destinations[0]?.target.path;
    if (key.scheduler !== 'aws-native' || path === undefined) return false;
    return path === secretId || (name !== undefined && path === name) || (nameInArn(path) !== undefined && nameInArn(path) === name);
  });
}

export async function openNativeContext(policy: Policy, event: RotationEvent, audit: AuditLog, runtimeOptions: Partial<RuntimeOptions> = {}): Promise<NativeContext> {
  const key = findNativeKey(policy, event.SecretId);
  if (key === undefined) {
    throw new NativeRotationError(
      'KR_NATIVE_NOT_CONFIGURED',
      `no key of policy ${policy.file} has scheduler: aws-native with the secret ${event.SecretId} as its destination; nothing was rolled (add the entry, or turn rotation off with keyroll aws disable-rotation)`,
    );
  }
  const runtime = await createRuntime(policy, { audit, ...runtimeOptions });
  const { destinations, fallbacks } = runtime.resolveKey(key);
  const primary = destinations[0];
  if (primary === undefined || !hasNativeRotation(primary.backend)) {
    await runtime.close();
    throw new NativeRotationError('KR_NATIVE_NOT_CONFIGURED', `key ${key.id}: aws-native needs an aws destination (keyroll validate says why)`);
  }
  const token = event.ClientRequestToken;
  const keyAudit = audit.child({ rotationId: token, keyId: key.id, organizationId: key.organizationId });
  const deferred = deferAlerts({ ...runtime.rotationDeps(keyAudit), owner: nativeOwner(token), newRotationId: () => token });
  return { key, primary, native: primary.backend.nativeRotation(), fallbacks, runtime, audit: keyAudit, deps: deferred.deps, deferred, event, token };
}

/** The AWS backend, or a wrapper of it (tests, metrics) that keeps its staging-label calls. */
function hasNativeRotation(backend: Backend): backend is Backend & Pick<AwsBackend, 'nativeRotation'> {
  return backend.kind === 'aws' && typeof (backend as Partial<Pick<AwsBackend, 'nativeRotation'>>).nativeRotation === 'function';
}
