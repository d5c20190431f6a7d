// The end of a recovery that answered a leak a died run left open (recovery.ts, invariant 6): the
// key is rolled and stored, and the leaked value is probed, so the alert says whether the leak is
// closed: 401 proves it dead; a value the API still accepts, or no answer, is an incident.
import { errorCode } from '../errors.ts';
import { sendAlert } from './key-alert.ts';
import type { LeakLeftOpen } from './leak-marker.ts';
import type { Transaction } from './transaction.ts';

type LeakProof = 'dead' | 'alive' | 'unproven' | 'not-stored';

async function proveLeakedDead(
  tx: Transaction,
  leak: LeakLeftOpen,
): Promise<{ proof: LeakProof; code?: string }> {
  if (leak.leaked === undefined) return { proof: 'not-stored' };
  try {
    const verdict = await tx.deps.api.probeSecret(leak.leaked, { organizationId: tx.key.organizationId });
    return verdict === 'invalid' ? { proof: 'dead' } : { proof: 'alive', code: 'KR_LEAK_STILL_ALIVE' };
  } catch (error) {
    return { proof: 'unproven', code: errorCode(error) };
  }
}

/** Audits and alerts the recovery of a leak left open; called once the re-roll is verified. */
export async function reportLeakRecovered(tx: Transaction, leak: LeakLeftOpen): Promise<void> {
  const { key, audit, deps, rotationId, progress } = tx;
  const { proof, code } = await proveLeakedDead(tx, leak);
  audit.emit('key.recovered', {
    step: 'recovery',
    result: 'rerolled',
    why: progress.recovering,
    leakReason: leak.reason,
    rolledKeyId: tx.plan.rollKeyId,
    ...(proof === 'not-stored' ? {} : { leakedValueDead: proof === 'dead' }),
    ...(code === undefined ? {} : { errorCode: code }),
  });
  const opening = `keyroll recovered key ${key.id}: a ${leak.reason} rotation died before it rolled ${tx.plan.rollKeyId}, so the stored secret still worked because it was the leaked value; the key was rolled now as a ${leak.reason}`;
  if (proof === 'dead' || proof === 'not-stored') {
    await sendAlert(deps, key, {
      severity: 'warning',
      summary:
        proof === 'dead'
          ? `${opening} and the API refuses the leaked value (401)`
          : `${opening}; the leaked value was a slot that is not stored, so it was not probed`,
      rotationId,
      step: 'recovery',
      errorCode: 'KR_RECOVERED_LEAK',
      nextAction: 'nothing to do: the new secret is stored and verified; review the leak as an incident',
    });
    return;
  }
  await sendAlert(deps, key, {
    severity: proof === 'alive' ? 'critical' : 'error',
    summary:
      proof === 'alive'
        ? `${opening}, but the API still accepts the leaked value`
        : `${opening}, but the API gave no answer on whether the leaked value is dead`,
    rotationId,
    step: 'recovery',
    errorCode: proof === 'alive' ? 'KR_LEAK_STILL_ALIVE' : 'KR_LEAK_UNPROVEN',
    nextAction:
      proof === 'alive'
        ? `revoke ${tx.plan.rollKeyId} by hand (dashboard) and find who else can mint it`
        : `probe the leaked value yourself; if the API still accepts it, revoke ${tx.plan.rollKeyId} by hand (dashboard)`,
  });
}
