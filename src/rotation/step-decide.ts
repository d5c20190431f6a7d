// Steps 2 and 3 of a rotation: take the key's lock (key-lock.ts, invariants 5 and 9), then decide
// under it whether to go on: another runner may have just rotated the key, or died mid-way and left
// its intent marker (invariant 6), which is repaired here. Both are safe to run again: a lock held
// by this rotation is refreshed, and recovery only clears what it proved.
import type { Intent, KeyState } from '../backends/public/types.ts';
import { decideDue } from '../policy/public/due.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { RotationStepError } from './errors.ts';
import { takeKeyLock } from './key-lock.ts';
import { LockKeeper } from './lock-keeper.ts';
import { markerMayStillBeActedOn, recoverLeftoverIntent, type RecoveryVerdict } from './recovery.ts';
import { activeSlot, isLeak, planRoll, standbyStillInUse } from './slots.ts';
import { probeStandby } from './standby.ts';
import { sendAlert } from './key-alert.ts';
import { auditDoubts, trustState } from './trusted-state.ts';
import type { Transaction } from './transaction.ts';
import type { KeyOutcome } from './types.ts';

/**
 * Takes the key's lock at every destination (key-lock.ts: every destination receives the new
 * secret, so every one is locked) and starts keeping it alive for the rotation; an outcome when
 * another runner holds one. rotate-key.ts gives the locks back when the rotation ends.
 */
export async function takeLock(tx: Transaction): Promise<KeyOutcome | undefined> {
  const { key, deps, audit, progress } = tx;
  await tx.enter('lock');
  const takenAtMs = deps.monotonicMs();
  const prover = deps.holderProver;
  const taken = await takeKeyLock({
    key,
    destinations: tx.destinations,
    owner: deps.owner,
    rotationId: tx.rotationId,
    // Issue 30: a holder proven dead (its pod gone, its container replaced) is not waited for.
    ...(prover
      ? { proveHolderDead: (holder: { owner: string }) => prover.proveDead(holder.owner, key.clockSkewMs) }
      : {}),
  });
  if ('busy' in taken) {
    const { busy: holder, at, heldBefore } = taken;
    // What the backend distrusted at the lock (a forged release mark, issue 27), unless the run's
    // read before the lock already audited it.
    if (taken.doubts !== undefined)
      auditDoubts(audit, { exists: true, doubts: taken.doubts }, { step: 'lock' }, tx.input.knownState);
    audit.emit('key.lock.busy', {
      step: 'lock',
      holder: holder.owner,
      holderRotationId: holder.rotationId,
      expiresAt: holder.expiresAt,
      ...(heldBefore > 0 ? { backend: at.backendName, path: at.target.path } : {}),
    });
    return tx.outcome({ result: 'busy', detail: 'lock-busy' });
  }
  const locks = taken.held;
  for (const { holder, proof, at } of taken.deadHolders)
    audit.emit('key.lock.holder_dead', {
      step: 'lock',
      holder: holder.owner,
      holderRotationId: holder.rotationId,
      expiresAt: holder.expiresAt,
      proof,
      ...(locks.length > 1 ? { backend: at.backendName, path: at.target.path } : {}),
    });
  // Invariant 9: the locks stay alive in the background until the rotation lets them go.
  const keeper = new LockKeeper({
    key,
    locks,
    takenAtMs,
    monotonicMs: deps.monotonicMs,
    onLost: () => {
      audit.emit('key.lock.lost', { step: progress.step });
    },
    onRefreshError: (code) => {
      audit.emit('key.lock.refresh_failed', { step: progress.step, errorCode: code });
    },
  });
  progress.keeper = keeper;
  keeper.start();
  audit.emit('key.lock.acquired', {
    step: 'lock',
    tookOver: keeper.tookOver,
    expiresAt: keeper.lock.expiresAt,
    ...(locks.length > 1 ? { locks: locks.length } : {}),
  });
  return undefined;
}

/**
 * Under the lock, reads the key's state and decides: an outcome ends the rotation here (skipped,
 * recovered); undefined goes on to the roll, with `tx.plan` naming the key or slot to roll.
 */
export async function decideUnderLock(tx: Transaction): Promise<KeyOutcome | undefined> {
  const { key, primary, deps, audit, trigger } = tx;
  const state = trustState(await primary.backend.readState(primary.target), key, deps.now());
  // Doubts the run already audited from its read before the lock are not audited twice.
  auditDoubts(audit, state, { step: 'lock' }, tx.input.knownState);
  tx.stateUnderLock = state;
  let dead: DeadValues = { storedDead: false, standbyKnownDead: false };
  if (state.intent && state.intent.rotationId !== tx.rotationId) {
    const decided = await decideAfterLeftover(tx, state, state.intent);
    if ('outcome' in decided) return decided.outcome;
    dead = decided;
  } else if (trigger.reason === 'drift') {
    const decided = await decideDriftHeal(tx, state);
    if ('outcome' in decided) return decided.outcome;
    dead = decided;
  } else if (!trigger.force) {
    const skip = skipReason(key, state, deps.now(), trigger.ignoreSchedule === true);
    if (skip) {
      audit.emit('key.skipped', { step: 'lock', why: skip, lastRotatedAt: state.lastRotatedAt });
      return tx.outcome({ result: 'skipped', detail: skip });
    }
  }
  return decideWhatToRoll(tx, state, dead);
}

/** What the decision under the lock learnt is dead already: nobody a roll of it could hurt. */
interface DeadValues {
  /** The primary's stored secret (a leftover marker's re-roll, a drift heal). */
  storedDead: boolean;
  /** The standby a drift heal rolls, known dead because its kept value names it as its key. */
  standbyKnownDead: boolean;
}

/** Invariant 10: which key (or slot) this rotation rolls, and whether consumers allow it now. */
function decideWhatToRoll(tx: Transaction, state: KeyState, dead: DeadValues): KeyOutcome | undefined {
  const { key, deps, audit, trigger } = tx;
  const { storedDead, standbyKnownDead } = dead;
  // A leak left open by a died run: the key (or slot) it was rolling, rolled as that leak would.
  const leak = tx.progress.leakRecovery;
  const rollTrigger = leak ? { ...trigger, reason: leak.reason, force: true } : trigger;
  const namedSlot = leak ? leak.rollKeyId : tx.input.slot;
  tx.plan = planRoll({ key, state, trigger: rollTrigger, namedSlot, storedDead });
  // Naming the active slot kills the value consumers use now: only a leak (it must die) or a
  // dead stored secret (nobody it still serves) may do that.
  if (key.slots && tx.plan.keepsAlive === undefined && !storedDead && !isLeak(rollTrigger)) {
    audit.emit('key.skipped', { step: 'lock', why: 'active-slot', activeKeyId: tx.plan.activeBefore });
    return tx.outcome({ result: 'skipped', detail: 'active-slot' });
  }
  // The consumerRefresh wait is skipped only for a secret known dead (nobody is served): the
  // stored one, or the standby being rolled.
  if (
    !storedDead &&
    !standbyKnownDead &&
    standbyStillInUse(key, tx.plan, state.lastRotatedAt, deps.now(), rollTrigger)
  ) {
    audit.emit('key.skipped', {
      step: 'lock',
      why: 'consumer-refresh',
      lastRotatedAt: state.lastRotatedAt,
      standby: tx.plan.rollKeyId,
    });
    return tx.outcome({ result: 'skipped', detail: 'consumer-refresh' });
  }
  return undefined;
}

/**
 * A drift heal was decided on a probe made before this lock: another runner may have healed the
 * key since. Probe again under the lock; roll only a secret that is still dead: the stored one, or
 * the standby a heal of a dead standby names (never the active slot for it).
 */
async function decideDriftHeal(
  tx: Transaction,
  state: KeyState,
): Promise<{ outcome: KeyOutcome } | DeadValues> {
  const { key, audit } = tx;
  const standby =
    key.slots && tx.input.slot !== undefined && tx.input.slot !== activeSlot(key.slots, state)
      ? tx.input.slot
      : undefined;
  const stillDead =
    standby === undefined ? await storedSecretDead(tx) : await standbyDead(tx, state, standby);
  if (stillDead === false) {
    audit.emit('key.skipped', { step: 'lock', why: 'drift-healed', lastRotatedAt: state.lastRotatedAt });
    return { outcome: tx.outcome({ result: 'skipped', detail: 'drift-healed' }) };
  }
  // Invariant 10: nobody can use a dead value, so a standby known dead need not wait for
  // consumers to refresh away from it. Known only when its kept value names it as its key.
  return standby === undefined
    ? { storedDead: true, standbyKnownDead: false }
    : { storedDead: false, standbyKnownDead: stillDead === 'certain' };
}

/**
 * Another rotation's intent marker is here (invariant 6): a run died or stalled mid-rotation.
 * Recovery probes the stored secret; this decides whether this rotation still rolls.
 */
async function decideAfterLeftover(
  tx: Transaction,
  state: KeyState,
  leftover: Intent,
): Promise<{ outcome: KeyOutcome } | DeadValues> {
  const { key, deps, audit, progress, trigger, rotationId } = tx;
  const tookOver = progress.keeper?.tookOver ?? false;
  const verdict = await recoverLeftoverIntent(key, leftover, tx.destinations, deps, audit, {
    tookOver,
    fenceFor: (destination) => progress.keeper?.fenceFor(destination),
  });
  // Invariant 9: the runner that left the marker may still act (a roll in flight that lands
  // after ours would kill what we store), so this rotation's own marker outlives it.
  if (markerMayStillBeActedOn(leftover, tookOver, deps.now()) !== undefined) {
    progress.holdUntil = laterOf(
      leftover.holdUntil,
      new Date(deps.now().getTime() + key.lockTtlMs).toISOString(),
    );
  }
  const alive: DeadValues = { storedDead: false, standbyKnownDead: false };
  if (verdict.kind === 'stored-secret-works' && verdict.kept !== undefined) {
    const rotateAnyway =
      trigger.force ||
      (trigger.ignoreSchedule === true && !withinMinInterval(key, state.lastRotatedAt, deps.now()));
    if (!rotateAnyway && !stillDue(key, state, deps.now())) {
      // The next run, with nobody's lock to take over, clears the marker and alerts then.
      audit.emit('key.skipped', { step: 'lock', why: 'intent-kept', lastRotatedAt: state.lastRotatedAt });
      return { outcome: tx.outcome({ result: 'skipped', detail: 'intent-kept' }) };
    }
    // This rotation replaces the marker (with its own, held): the interrupted one is reported now.
    await sendAlert(deps, key, {
      severity: 'warning',
      summary: `keyroll took over key ${key.id} from a run that stopped or stalled mid-rotation; the stored secret still works`,
      rotationId,
      step: 'recovery',
      errorCode: 'KR_RECOVERED_INTENT',
      nextAction: `rotating now; the intent marker stays until ${progress.holdUntil ?? 'later'} in case the stalled run still acts, and later runs probe the stored secret`,
    });
    return alive;
  }
  if (verdict.kind === 'stored-secret-works') return decideAfterRecovery(tx, state, leftover, verdict);
  // The stored secret is dead, missing or unprobeable: until the re-roll is stored the key
  // may be unusable, so a failure from here on keeps the marker and alerts critical.
  progress.recovering = verdict.why;
  progress.mayHaveRolled = true;
  // A leak the died run left open is this rotation's to answer, as a leak (recovery.ts).
  if (verdict.why === 'leak-not-rolled') progress.leakRecovery = verdict.leak;
  return {
    storedDead: verdict.why !== 'probe-failed' && verdict.why !== 'leak-not-rolled',
    standbyKnownDead: false,
  };
}

/** Recovery proved the stored secret works: report it, and roll only when still due or asked to. */
async function decideAfterRecovery(
  tx: Transaction,
  state: KeyState,
  leftover: Intent,
  verdict: Extract<RecoveryVerdict, { kind: 'stored-secret-works' }>,
): Promise<{ outcome: KeyOutcome } | DeadValues> {
  const { key, deps, audit, trigger, rotationId } = tx;
  if (verdict.failed.length > 0) {
    throw new RotationStepError(
      'recovery',
      key.id,
      'KR_RECOVERY_REPAIR_FAILED',
      `the stored secret works, but copying it to ${verdict.failed.join(', ')} failed; those destinations hold a stale or dead secret`,
    );
  }
  // A marker a finished rotation kept on purpose (holdUntil, after a takeover) whose secret
  // works: nothing died, so it is cleared without a recovery alert.
  const heldAndDone =
    leftover.holdUntil !== undefined && verdict.completed !== undefined && verdict.repaired.length === 0;
  if (!heldAndDone) {
    audit.emit('key.recovered', {
      step: 'recovery',
      result: 'stored-secret-works',
      repaired: verdict.repaired,
      completedRotationId: verdict.completed?.rotationId,
    });
    await sendAlert(deps, key, {
      severity: 'warning',
      summary: `keyroll recovered key ${key.id}: a run died mid-rotation; the stored secret still works`,
      rotationId,
      step: 'recovery',
      errorCode: 'KR_RECOVERED_INTENT',
      nextAction:
        verdict.repaired.length > 0
          ? `copied the working secret to ${verdict.repaired.join(', ')}`
          : 'nothing to do',
    });
  }
  const lastRotatedAt = verdict.completed?.rotatedAt ?? state.lastRotatedAt;
  const rotateAnyway =
    trigger.force || (trigger.ignoreSchedule === true && !withinMinInterval(key, lastRotatedAt, deps.now()));
  if (
    !rotateAnyway &&
    !stillDue(key, { exists: state.exists, ...(lastRotatedAt ? { lastRotatedAt } : {}) }, deps.now())
  ) {
    if (!heldAndDone) return { outcome: tx.outcome({ result: 'recovered', detail: 'stored-secret-works' }) };
    audit.emit('key.skipped', { step: 'lock', why: 'already-rotated', lastRotatedAt });
    return { outcome: tx.outcome({ result: 'skipped', detail: 'already-rotated' }) };
  }
  return { storedDead: false, standbyKnownDead: false };
}

/** True when the primary's stored secret is refused by the API (a probe failure counts as not dead). */
async function storedSecretDead(tx: Transaction): Promise<boolean> {
  try {
    const stored = await tx.primary.backend.readSecret(tx.primary.target);
    if (!stored) return false;
    return (
      (await tx.deps.api.probeSecret(stored.secret, { organizationId: tx.key.organizationId })) === 'invalid'
    );
  } catch {
    return false;
  }
}

/**
 * Whether the standby `slotId` is still dead: `certain` when its kept value names it as its key,
 * `uncertain` when the value names no key, false when it works or cannot be probed now.
 */
async function standbyDead(
  tx: Transaction,
  state: KeyState,
  slotId: string,
): Promise<'certain' | 'uncertain' | false> {
  const { key, primary, deps } = tx;
  if (!key.slots) return false;
  const stored = await primary.backend.readSecret(primary.target).catch(() => undefined);
  const probe = await probeStandby(
    { organizationId: key.organizationId, slots: key.slots },
    primary,
    state,
    stored,
    (secret, organizationId) => deps.api.probeSecret(secret, { organizationId }),
  );
  if (probe.keyId !== slotId || probe.verdict !== 'dead') return false;
  return probe.certain ? 'certain' : 'uncertain';
}

function laterOf(a: string | undefined, b: string): string {
  return a !== undefined && Date.parse(a) > Date.parse(b) ? a : b;
}

function withinMinInterval(key: KeyPolicy, lastRotatedAt: string | undefined, now: Date): boolean {
  return lastRotatedAt !== undefined && now.getTime() - Date.parse(lastRotatedAt) < key.minIntervalMs;
}

function stillDue(key: KeyPolicy, state: KeyState, now: Date): boolean {
  return decideDue(key, { ...(state.lastRotatedAt ? { lastRotatedAt: state.lastRotatedAt } : {}) }, now).due;
}

/** Invariant 5: the minimum interval stops rotation loops; a forced run never gets here. */
function skipReason(
  key: KeyPolicy,
  state: KeyState,
  now: Date,
  ignoreSchedule: boolean,
): 'min-interval' | 'already-rotated' | undefined {
  if (state.lastRotatedAt) {
    const since = now.getTime() - Date.parse(state.lastRotatedAt);
    if (since < key.minIntervalMs) return 'min-interval';
  }
  if (!ignoreSchedule && !stillDue(key, state, now)) return 'already-rotated';
  return undefined;
}
