// Drift (docs/design.md, "Consumers and leaks"): a stored secret that stopped working because someone
// rolled the key outside keyroll (the dashboard, another tool). Found by probing the stored
// secret against the API (a one-item project list), under the key's lock so the probe record
// never races a rotation's bookkeeping; reported critical (consumers are failing), and healed by
// a rotation when the policy says `onDrift: rotate`.
import { withSecretScope } from '../audit/sanitize.ts';
import type { KeyState } from '../backends/types.ts';
import { errorCode, errorMessage } from '../errors.ts';
import type { KeyPolicy } from '../policy/schema.ts';
import { activeSlot } from './slots.ts';
import { sendAlert } from './store-outcome.ts';
import type { ResolvedDestination, RotationDeps } from './types.ts';

export type DriftVerdict = 'works' | 'dead' | 'busy' | 'nothing-stored' | 'probe-failed';

/** What `rotate --key` should name to heal by hand: the key, or a slot entry's active (dead) slot. */
function healTarget(key: KeyPolicy, state: Pick<KeyState, 'lastKeyId'>): string {
  return key.slots ? activeSlot(key.slots, state) : key.id;
}

/** Whether `run` should probe now: the key's last probe (or rotation) is older than `driftCheck`. */
export function driftCheckDue(key: KeyPolicy, state: Pick<KeyState, 'lastProbe' | 'lastRotatedAt' | 'exists'>, now: Date): boolean {
  if (key.driftCheckMs === undefined || !state.exists) return false;
  const last = Math.max(state.lastProbe ? Date.parse(state.lastProbe.at) : 0, state.lastRotatedAt ? Date.parse(state.lastRotatedAt) : 0);
  return now.getTime() - last >= key.driftCheckMs;
}

/**
 * Probes the stored secret of `key` under its lock and records the probe. A dead secret is
 * audited (`key.drift.detected`) and alerted critical after the lock is released; the caller
 * heals it with a rotation when `onDrift` is `rotate`.
 */
export async function probeForDrift(key: KeyPolicy, destinations: readonly ResolvedDestination[], deps: RotationDeps, state: Pick<KeyState, 'lastKeyId'>): Promise<DriftVerdict> {
  const primary = destinations[0];
  if (!primary) throw new Error(`key ${key.id} has no destination`);
  const probeId = deps.newRotationId();
  const audit = deps.audit.child({ rotationId: probeId, keyId: key.id, organizationId: key.organizationId });
  const verdict = await withSecretScope(async (): Promise<DriftVerdict> => {
    const locked = await primary.backend.acquireLock(primary.target, { owner: deps.owner, rotationId: probeId, ttlMs: key.lockTtlMs, clockSkewMs: key.clockSkewMs });
    if (!locked.acquired) return 'busy';
    try {
      const stored = await primary.backend.readSecret(primary.target);
      if (!stored) return 'nothing-stored';
      let answer: 'valid' | 'invalid';
      try {
        answer = await deps.api.probeSecret(stored.secret, { organizationId: key.organizationId });
      } catch (error) {
        audit.emit('key.probe', { step: 'drift', verdict: 'probe-failed', errorCode: errorCode(error) });
        return 'probe-failed';
      }
      const result = answer === 'valid' ? 'works' : 'dead';
      audit.emit('key.probe', { step: 'drift', verdict: result === 'works' ? 'stored-secret-works' : 'stored-secret-dead' });
      try {
        await primary.backend.recordProbe(primary.target, { at: deps.now().toISOString(), result });
      } catch (error) {
        // Only the probe interval depends on it: the next run probes again sooner.
        audit.emit('key.failed', { step: 'drift', errorCode: errorCode(error), error: errorMessage(error), nextAction: 'the next run probes again' });
      }
      return result;
    } finally {
      await primary.backend.releaseLock(primary.target, locked.lock).catch(() => undefined);
    }
  });
  if (verdict === 'dead') {
    const heal = key.onDrift === 'rotate';
    audit.emit('key.drift.detected', { step: 'drift', onDrift: key.onDrift });
    await sendAlert(deps, key, {
      severity: 'critical',
      summary: `the stored secret of key ${key.id} (${key.organizationId}) no longer works: the key was rolled outside keyroll (dashboard, another tool), and consumers reading it fail`,
      rotationId: probeId,
      step: 'drift',
      errorCode: 'KR_DRIFT_DETECTED',
      nextAction: heal ? 'keyroll rotates the key now (onDrift: rotate) and stores a working secret' : `rotate it: keyroll rotate --key ${healTarget(key, state)} --reason manual --force (onDrift: alert)`,
    });
  }
  return verdict;
}
