// Drift (docs/design.md, "Consumers and leaks"): a stored secret that stopped working because someone
// rolled the key outside keyroll (the dashboard, another tool). Found by probing the stored
// secret against the API (a one-item project list); reported critical (consumers are failing), and
// healed by a rotation when the policy says `onDrift: rotate`.
// The probe takes no key lock while what it finds is healthy: the daemon probes every key on every
// sweep, and a lock taken that often would write a version of an AWS secret each time (AWS keeps
// at most ~100 and asks for one every 10 minutes at most; backends/aws/lock/target.ts). Its record
// changes only the probe's own field, which the backends that allow it write without the lock and
// without undoing a rotation's bookkeeping (Backend.recordsProbeWithoutLock). A dead finding is
// confirmed under the lock before anything is alerted or healed: a rotation in flight rolls the
// stored secret before it stores the new one, and a probe between the two finds it dead (a lock
// held by another runner then answers busy, as before). A backend whose record needs the lock
// (HashiCorp Vault) probes under it throughout.
// A two-slot entry has its standby probed too (standby.ts). A dead standby serves nobody (consumers
// read the active slot; one that has not refreshed since the last alternation fails until it
// does) but whoever rolled it holds its live secret: it is alerted (error, KR_DRIFT_STANDBY_DEAD)
// and re-rolled at its turn, as the standby (an alternation), never by rolling the active slot.
import { withSecretScope } from '../audit/public/sanitize.ts';
import type { HeldLock, KeyState } from '../backends/public/types.ts';
import { errorCode, errorMessage } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { underKeyLock } from './key-lock.ts';
import { activeSlot } from './slots.ts';
import { probeStandby, type StandbyProbe } from './standby.ts';
import { sendAlert } from './key-alert.ts';
import type { NonEmptyList, ResolvedDestination, RotationDeps } from './types.ts';

export type DriftVerdict = 'works' | 'dead' | 'busy' | 'nothing-stored' | 'probe-failed';

export interface DriftReport {
  /** The stored secret (a two-slot entry's active slot). */
  stored: DriftVerdict;
  /** Two-slot entries whose stored secret could be read: the standby slot. */
  standby?: StandbyProbe;
}

/** What `rotate --key` should name to heal by hand: the key, or a slot entry's active (dead) slot. */
function healTarget(key: KeyPolicy, state: Pick<KeyState, 'lastKeyId'>): string {
  return key.slots ? activeSlot(key.slots, state) : key.id;
}

/** Whether `run` should probe now: the key's last probe (or rotation) is older than `driftCheck`. */
export function driftCheckDue(
  key: KeyPolicy,
  state: Pick<KeyState, 'lastProbe' | 'lastRotatedAt' | 'exists'>,
  now: Date,
): boolean {
  if (key.driftCheckMs === undefined || !state.exists) return false;
  const last = Math.max(
    state.lastProbe ? Date.parse(state.lastProbe.at) : 0,
    state.lastRotatedAt ? Date.parse(state.lastRotatedAt) : 0,
  );
  return now.getTime() - last >= key.driftCheckMs;
}

/**
 * Probes the stored secret of `key` and records the probe; a two-slot entry's standby is probed as
 * well. A dead stored secret is audited (`key.drift.detected`) and alerted critical once the lock
 * that confirmed it is released, a dead standby alerted as an error; the caller heals either with
 * a rotation when `onDrift` is `rotate` (the active slot, or the standby at its turn).
 */
export async function probeForDrift(
  key: KeyPolicy,
  destinations: NonEmptyList<ResolvedDestination>,
  deps: RotationDeps,
  state: Pick<KeyState, 'lastKeyId'>,
): Promise<DriftReport> {
  const [primary] = destinations;
  const probeId = deps.newRotationId();
  const audit = deps.audit.child({ rotationId: probeId, keyId: key.id, organizationId: key.organizationId });
  const report = await withSecretScope(async (): Promise<DriftReport> => {
    if (primary.backend.recordsProbeWithoutLock?.(primary.target) === true) {
      // What the probe finds is audited only when it stands: a dead finding is probed again under the lock.
      const seen: [KeyEvent, Record<string, unknown>][] = [];
      const hold: Emit = (event, fields) => {
        seen.push([event, fields]);
      };
      const screened = await probeStored(key, primary, deps, state, hold, { record: 'when-healthy' });
      if (!foundDead(screened)) {
        for (const [event, fields] of seen) audit.emit(event, fields);
        return screened;
      }
    }
    // The primary's lock alone: the probe writes only its record there (key-lock.ts).
    const emit: Emit = (event, fields) => {
      audit.emit(event, fields);
    };
    const confirmed = await underKeyLock(
      { key, destinations: [primary], owner: deps.owner, rotationId: probeId },
      (held) =>
        probeStored(key, primary, deps, state, emit, {
          record: 'always',
          ...(held[0] ? { releaseLock: held[0].lock } : {}),
        }),
    );
    return 'busy' in confirmed ? { stored: 'busy' } : confirmed.done;
  });
  if (report.stored === 'dead') {
    const heal = key.onDrift === 'rotate';
    audit.emit('key.drift.detected', {
      step: 'drift',
      onDrift: key.onDrift,
      ...(key.slots ? { slot: 'active' } : {}),
    });
    await sendAlert(deps, key, {
      severity: 'critical',
      summary: `the stored secret of key ${key.id} (${key.organizationId}) no longer works: the key was rolled outside keyroll (dashboard, another tool), and consumers reading it fail`,
      rotationId: probeId,
      step: 'drift',
      errorCode: 'KR_DRIFT_DETECTED',
      nextAction: heal
        ? 'keyroll rotates the key now (onDrift: rotate) and stores a working secret'
        : `rotate it: keyroll rotate --key ${healTarget(key, state)} --reason manual --force (onDrift: alert)`,
    });
  } else if (report.standby?.verdict === 'dead') {
    await alertDeadStandby(key, report.standby, probeId, deps, audit);
  }
  return report;
}

type KeyEvent = Parameters<RotationDeps['audit']['emit']>[0];
type Emit = (event: KeyEvent, fields: Record<string, unknown>) => void;

function foundDead(report: DriftReport): boolean {
  return report.stored === 'dead' || report.standby?.verdict === 'dead';
}

/**
 * One probe of the stored secret (and a slot entry's standby), with its audit events, and its
 * record: `when-healthy` records only what needs no confirmation (nothing dead), `always` records
 * it (under the lock, giving the lock back with the record where the backend can: AWS).
 */
async function probeStored(
  key: KeyPolicy,
  primary: ResolvedDestination,
  deps: RotationDeps,
  state: Pick<KeyState, 'lastKeyId'>,
  emit: Emit,
  options: { record: 'when-healthy' | 'always'; releaseLock?: HeldLock },
): Promise<DriftReport> {
  const stored = await primary.backend.readSecret(primary.target);
  if (!stored) return { stored: 'nothing-stored' };
  let answer: 'valid' | 'invalid';
  try {
    answer = await deps.api.probeSecret(stored.secret, { organizationId: key.organizationId });
  } catch (error) {
    emit('key.probe', { step: 'drift', verdict: 'probe-failed', errorCode: errorCode(error) });
    return { stored: 'probe-failed' };
  }
  const result = answer === 'valid' ? 'works' : 'dead';
  emit('key.probe', {
    step: 'drift',
    verdict: result === 'works' ? 'stored-secret-works' : 'stored-secret-dead',
    ...(key.slots ? { slot: 'active' } : {}),
  });
  const standby = key.slots
    ? await probeStandby(
        { organizationId: key.organizationId, slots: key.slots },
        primary,
        state,
        stored,
        (secret, organizationId) => deps.api.probeSecret(secret, { organizationId }),
      )
    : undefined;
  if (standby !== undefined)
    emit('key.probe', {
      step: 'drift',
      slot: 'standby',
      standbyKeyId: standby.keyId,
      verdict: standbyVerdictText(standby),
      ...(standby.errorCode ? { errorCode: standby.errorCode } : {}),
    });
  const report: DriftReport = { stored: result, ...(standby ? { standby } : {}) };
  if (options.record === 'when-healthy' && foundDead(report)) return report;
  try {
    // The last write under a lock, if any: a backend that can gives the lock back with it (AWS).
    await primary.backend.recordProbe(
      primary.target,
      { at: deps.now().toISOString(), result },
      ...(options.releaseLock ? [{ releaseLock: options.releaseLock }] : []),
    );
  } catch (error) {
    // Only the probe interval depends on it: the next run probes again sooner.
    emit('key.failed', {
      step: 'drift',
      errorCode: errorCode(error),
      error: errorMessage(error),
      nextAction: 'the next run probes again',
    });
  }
  return report;
}

function standbyVerdictText(standby: StandbyProbe): string {
  if (standby.verdict === 'works') return 'stored-secret-works';
  if (standby.verdict === 'dead') return 'stored-secret-dead';
  return standby.verdict;
}

/**
 * A dead standby: nobody can use its value, so rolling it breaks no consumer (invariant 10), but
 * whoever rolled it outside keyroll holds a live secret of the organization until it is rolled.
 * It is rolled as the standby, never by rolling the active slot, whose value consumers use.
 */
async function alertDeadStandby(
  key: KeyPolicy,
  standby: StandbyProbe,
  probeId: string,
  deps: RotationDeps,
  audit: RotationDeps['audit'],
): Promise<void> {
  const heal = key.onDrift === 'rotate';
  audit.emit('key.drift.detected', {
    step: 'drift',
    onDrift: key.onDrift,
    slot: 'standby',
    standbyKeyId: standby.keyId,
  });
  await sendAlert(deps, key, {
    severity: 'error',
    summary: `the standby slot ${standby.keyId} of key ${key.id} (${key.organizationId}) no longer works: it was rolled outside keyroll (dashboard, another tool); consumers read the active slot, which still works, and one that has not refreshed since the last rotation fails until it does`,
    rotationId: probeId,
    step: 'drift',
    errorCode: 'KR_DRIFT_STANDBY_DEAD',
    nextAction: heal
      ? `keyroll rolls the standby ${standby.keyId} at its turn (onDrift: rotate): now, or once consumerRefresh has passed since the last rotation when the stored value does not name its key; the active slot is not rolled`
      : `the next scheduled rotation rolls it (onDrift: alert); to end the outside secret sooner: keyroll rotate --key ${standby.keyId} --reason leak`,
  });
}
