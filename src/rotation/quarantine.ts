// What happens to a key in a failure streak outside a rotation: the reminder about a quarantined
// key (no attempt runs, so no failure alerts it), and `keyroll resume`, which ends the streak so
// the next run attempts the key at once. Both change the streak under the key lock, like every
// bookkeeping change: a rotation that succeeds meanwhile ends the streak itself, and a reminder
// written over its record would put the key back in quarantine.
import type { AuditLog } from '../audit/public/events.ts';
import type { KeyState, LockInfo } from '../backends/public/types.ts';
import { errorCode } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import {
  activeStreak,
  automaticAttemptGate,
  describeStreak,
  endedStreak,
  failureSettingsOf,
  quarantineReminderDue,
  type FailureStreak,
} from './failure-streak.ts';
import { sendAlert } from './key-alert.ts';
import { underKeyLock } from './key-lock.ts';
import { readTrustedState } from './trusted-state.ts';
import type { ResolvedDestination, RotationDeps } from './types.ts';

type LockDeps = Pick<RotationDeps, 'owner' | 'now' | 'newRotationId'>;

/**
 * Runs `body` on the key's trusted state under the primary's lock (key-lock.ts: the streak is
 * bookkeeping of the primary alone); `busy` with the holder when another runner has it.
 */
async function underPrimaryLock<T>(
  key: KeyPolicy,
  primary: ResolvedDestination,
  deps: LockDeps,
  body: (state: KeyState) => Promise<T>,
): Promise<{ busy: LockInfo } | { done: T }> {
  return underKeyLock(
    { key, destinations: [primary], owner: deps.owner, rotationId: deps.newRotationId() },
    async () => body(await readTrustedState(primary, key, deps.now())),
  );
}

/**
 * A quarantined key that a run skips: when its last alert is `remindEvery` old, records the
 * reminder and alerts (after the lock is released). True when a reminder went out. Never throws:
 * the key stays quarantined and visible in `status` and the gauge whatever happens here.
 * `read` is the streak as the run read it before any lock: when no reminder is due by it, no lock
 * is taken (the daemon's sweep passes a quarantined key every few minutes, and a lock taken each
 * time writes a version of an AWS secret each time: backends/aws/lock/target.ts); when one is, the
 * streak is read again under the lock before the reminder is written.
 */
export async function remindQuarantined(
  key: KeyPolicy,
  primary: ResolvedDestination,
  deps: RotationDeps,
  audit: AuditLog,
  read?: FailureStreak,
): Promise<boolean> {
  if (read !== undefined && !quarantineReminderDue(read, failureSettingsOf(key), deps.now())) return false;
  let streak: FailureStreak | undefined;
  try {
    const result = await underPrimaryLock(key, primary, deps, async (state) => {
      const gate = automaticAttemptGate(state, deps.now());
      if (
        gate.kind !== 'quarantined' ||
        !quarantineReminderDue(gate.streak, failureSettingsOf(key), deps.now())
      )
        return undefined;
      const lastAlertedAt = deps.now().toISOString();
      await primary.backend.recordFailure(primary.target, { ...gate.streak.last, lastAlertedAt });
      return { ...gate.streak, lastAlertedAt };
    });
    if ('done' in result) streak = result.done;
  } catch (error) {
    audit.emit('key.failed', {
      keyId: key.id,
      organizationId: key.organizationId,
      step: 'quarantine',
      errorCode: errorCode(error),
      nextAction: 'the key stays quarantined; the next run tries the reminder again',
    });
    return false;
  }
  if (streak === undefined) return false;
  await sendAlert(deps, key, {
    severity: 'error',
    summary: `key ${key.id} (${key.organizationId}) is still QUARANTINED: ${describeStreak(streak)}; the last failure was at step ${streak.last.step} (${streak.last.errorCode})`,
    rotationId: deps.newRotationId(),
    step: 'quarantine',
    errorCode: 'KR_KEY_QUARANTINED',
    nextAction: `no automatic attempts until a person acts: fix the cause, then \`keyroll resume --key ${key.id} --actor <name>\` (or \`keyroll rotate --key ${key.id}\`)`,
    details: {
      lastErrorCode: streak.last.errorCode,
      consecutive: streak.consecutive,
      firstAt: streak.firstAt,
      quarantinedAt: streak.quarantinedAt,
    },
  });
  return true;
}

export type ResumeResult =
  { kind: 'resumed'; streak: FailureStreak } | { kind: 'no-streak' } | { kind: 'busy'; holder: LockInfo };

/**
 * `keyroll resume`: ends the key's failure streak (quarantine or backoff) under its lock, so the
 * next run attempts it at once. Audited with the actor; the last failure stays as history.
 */
export async function resumeKey(
  key: KeyPolicy,
  primary: ResolvedDestination,
  deps: LockDeps,
  audit: AuditLog,
  actor: string,
): Promise<ResumeResult> {
  const result = await underPrimaryLock(key, primary, deps, async (state): Promise<ResumeResult> => {
    const streak = activeStreak(state);
    if (streak === undefined) return { kind: 'no-streak' };
    await primary.backend.recordFailure(primary.target, endedStreak(streak));
    audit.emit('key.resumed', {
      keyId: key.id,
      organizationId: key.organizationId,
      actor,
      consecutive: streak.consecutive,
      firstAt: streak.firstAt,
      lastErrorCode: streak.last.errorCode,
      ...(streak.quarantinedAt ? { quarantinedAt: streak.quarantinedAt } : {}),
    });
    return { kind: 'resumed', streak };
  });
  return 'busy' in result ? { kind: 'busy', holder: result.busy } : result.done;
}
