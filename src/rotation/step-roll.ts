// Steps 4 to 6 of a rotation: the intent marker (invariant 6), the roll, and the store that
// follows it with nothing in between (invariant 2). The roll is the one step that is not safe
// to repeat blindly once answered; everything before it is, and the marker makes a crash after
// it visible to the next run, which probes and re-rolls (docs/design.md, "Roll outcomes").
import type { Secret } from '../audit/public/secret.ts';
import { RotationStepError } from './errors.ts';
import { ensureFreshCredentials } from './preflight.ts';
import { leakMarkerFields } from './leak-marker.ts';
import { rollWithRetries, type AttemptGuard, type RollSuccess } from './roll.ts';
import { storeSecret, type StoreReport } from './store.ts';
import { auditStore, storeFailed } from './store-outcome.ts';
import type { Transaction } from './transaction.ts';
import { isLeakReason, type KeyOutcome } from './types.ts';
import { releaseBudget, reserveWriteBudget } from './write-budget.ts';

// age and its elliptic curves take longer to load than the rest of a cold start, and only a
// policy with an escrow can need them: loaded then, before the roll, so a broken install fails
// before a secret was rolled, never after (invariant 4).
let escrowModule: Promise<typeof import('./escrow.ts')> | undefined;
const loadEscrow = (): Promise<typeof import('./escrow.ts')> => (escrowModule ??= import('./escrow.ts'));

export interface Stored {
  rolled: RollSuccess;
  report: StoreReport;
  rotatedAt: string;
  exposureMs: number | undefined;
}

/**
 * Everything the roll needs, made ready before it: the escrow module, credentials that outlast
 * the roll and the store (invariant 2), the lock proven still ours (invariant 9), the marker
 * (invariant 6) and, for a slot entry that alternates, the active slot's secret, whose life
 * verify checks after the store (invariant 10). Safe to repeat: each part is idempotent.
 */
export async function prepareRoll(
  tx: Transaction,
): Promise<{ sealToEscrow: Parameters<typeof storeSecret>[3]['sealToEscrow']; keptAlive?: Secret }> {
  const { key, deps, primary, progress } = tx;
  const keeper = progress.keeper;
  if (!keeper) throw new Error('prepareRoll needs the lock');
  const sealToEscrow = deps.escrow ? (await loadEscrow()).sealToEscrow : undefined;
  // Invariant 2: credentials are renewed now, so no token renewal or login can land between
  // the roll answer and the write.
  await ensureFreshCredentials(key, [...tx.destinations, ...tx.fallbacks]);
  // A leak's marker records the value stored now (leak-marker.ts), and invariant 10 keeps alive the
  // secret consumers use now: one read under the lock serves both, and a rotation that needs
  // neither reads nothing (a leak's read is one GetSecretValue on AWS's read quota, not its writes).
  const leakReason = isLeakReason(tx.trigger.reason) ? tx.trigger.reason : progress.leakRecovery?.reason;
  const storedNow =
    tx.plan.keepsAlive === undefined && leakReason === undefined
      ? undefined
      : await primary.backend.readSecret(primary.target);
  const keptAlive = tx.plan.keepsAlive === undefined ? undefined : storedNow?.secret;

  // Invariant 5 before invariant 6: a lock that a long preflight or recovery let expire may
  // have been taken over, and the new holder may have set its own marker. Checking (and
  // renewing) the lock first means this rotation never overwrites that marker, and never
  // clears it afterwards as its own when the lost lock stops it.
  if (keeper.remainingMs() < key.lockTtlMs / 2) await keeper.refresh();
  keeper.assertHeld('lock');

  // Invariant 6: the intent marker is durable before the roll, so a crash after it is found.
  // It names the key (or slot) being rolled.
  // A leak's marker says so, with the value stored now: if this run dies before storing, that
  // value still works because it is the leaked one, and the next run's recovery rolls it instead
  // of keeping it.
  await tx.enter('intent');
  await primary.backend.setIntent(primary.target, {
    rotationId: tx.rotationId,
    keyId: tx.plan.rollKeyId,
    owner: deps.owner,
    startedAt: deps.now().toISOString(),
    ...(progress.holdUntil === undefined ? {} : { holdUntil: progress.holdUntil }),
    ...leakMarkerFields(leakReason, storedNow),
  });
  progress.intentSet = true;
  tx.audit.emit('key.intent.set', {
    step: 'intent',
    ...(key.slots ? { rollingKeyId: tx.plan.rollKeyId, activeKeyId: tx.plan.activeBefore } : {}),
  });
  // Invariants 2 and 11: the writes after the roll (and the locks' refresh between two
  // destinations' writes) have their turn in the backend's quota now, so the roll answer is
  // followed by the write at once, however busy the account is (write-budget.ts).
  progress.writeBudget = await reserveWriteBudget(tx.destinations, keeper.locks);
  return { sealToEscrow, ...(keptAlive ? { keptAlive } : {}) };
}

/** The roll and the store after it; an outcome when the store failed (the key may be unusable). */
export async function rollAndStore(
  tx: Transaction,
  sealToEscrow: Parameters<typeof storeSecret>[3]['sealToEscrow'],
): Promise<Stored | KeyOutcome> {
  const { key, deps, primary, progress, audit } = tx;
  const keeper = progress.keeper;
  if (!keeper) throw new Error('rollAndStore needs the lock');
  tx.enterRoll();
  // Invariant 9: each attempt proves the lock first and holds background refreshes until the
  // store is done, so nothing but the write follows the roll answer (invariant 2).
  const leaseMs = deps.leaseNeededMs?.(key) ?? 0;
  const guard: AttemptGuard = {
    before: () => keeper.holdFor(leaseMs, 'roll'),
    after: () => {
      keeper.release();
    },
  };
  // The key's audit, so the roll step's probe and retry events carry the key and rotation ids.
  const rolled = await rollWithRetries(
    key,
    primary,
    { ...deps, audit },
    progress,
    tx.input.signal,
    guard,
    tx.plan.rollKeyId,
  );
  const answeredAtMs = deps.monotonicMs();
  const rotatedAt = deps.now().toISOString();
  progress.rolled = true;

  // Invariant 2: nothing but the backend writes between the roll answer and the store.
  tx.enterStore();
  const budget = progress.writeBudget;
  const report = await storeSecret(
    {
      secret: rolled.secret,
      keyId: tx.plan.rollKeyId,
      organizationId: key.organizationId,
      rotationId: tx.rotationId,
      rotatedAt,
    },
    tx.destinations,
    tx.fallbacks,
    {
      policy: {
        attempts: key.store.attempts,
        initialMs: key.store.initialBackoffMs,
        maxMs: key.store.maxBackoffMs,
      },
      sleep: (ms) => deps.sleep(ms),
      monotonicMs: deps.monotonicMs,
      ...(deps.escrow ? { escrow: deps.escrow } : {}),
      sealToEscrow,
      // Invariant 9: every destination's write carries that destination's lock, so a runner that
      // lost its locks cannot overwrite what the new holder stored anywhere. Fallbacks hold none.
      fenceFor: (destination) => keeper.fenceFor(destination),
      // Each write on the budget taken for it before the roll, and only it (write-budget.ts).
      ...(budget ? { budgetFor: (destination, write) => budget.write(destination, write) } : {}),
      // The lease proven before the roll covers the primary's write; the others get a fresh one,
      // on the budget taken for that refresh.
      afterPrimary: () => (budget ? budget.refresh(() => keeper.refresh()) : keeper.refresh()),
    },
  ).finally(() => {
    keeper.release();
    releaseBudget(budget);
  });
  const exposureMs =
    report.firstDurableAtMs === undefined ? undefined : Math.round(report.firstDurableAtMs - answeredAtMs);
  tx.endRollAt(answeredAtMs);
  auditStore(audit, rolled, report, answeredAtMs);
  if (exposureMs !== undefined) deps.observer?.exposure(exposureMs);
  await deps.checkpoint?.('store');
  if (!report.allDestinationsStored) {
    return await storeFailed(
      key,
      tx.rotationId,
      rotatedAt,
      report,
      exposureMs,
      deps,
      audit,
      (end, extra) => tx.outcome(end, extra),
      tx.plan.rollKeyId,
      tx.plan.keepsAlive,
    );
  }
  progress.stored = true;
  return { rolled, report, rotatedAt, exposureMs };
}

export function isStored(value: Stored | KeyOutcome): value is Stored {
  return 'report' in value;
}

export function lockLostAfterStore(tx: Transaction): RotationStepError {
  return new RotationStepError(
    'finish',
    tx.key.id,
    'KR_LOCK_LOST',
    'another runner took over the key lock after the new secret was stored; the intent marker stays and the next run probes the stored secret',
  );
}
