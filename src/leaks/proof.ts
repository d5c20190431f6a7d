// Proof of death: after a leak rotation keyroll calls the API with the leaked value itself (a
// one-item project list, as every stored-secret probe) and records what the API answered. A
// rotation that "succeeded" while the leaked value still opens the API is the worst outcome a
// leak response can have, so it is audited at error level and alerted critical.
import type { Alerter } from '../alerts/public/types.ts';
import type { AuditLog } from '../audit/public/events.ts';
import type { Secret } from '../audit/public/secret.ts';
import { errorCode } from '../errors.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import type { Runtime } from '../rotation/public/runtime.ts';
import type { KeyResult } from '../rotation/public/types.ts';

/** `refused`: the API answered 401; `still-works`: it answered with data; `unknown`: no answer that says (network, 5xx, 429). */
export type DeathProof = 'refused' | 'still-works' | 'unknown';

export interface ProbeVerdict {
  verdict: DeathProof;
  /** Why the probe said nothing (verdict `unknown`). */
  errorCode?: string;
}

/** Calls the API with the leaked value: 401 proves it dead. Records nothing. */
export async function probeLeakedSecret(
  runtime: Pick<Runtime, 'api'>,
  leaked: Secret,
  organizationId: string,
): Promise<ProbeVerdict> {
  try {
    return {
      verdict:
        (await runtime.api.probeSecret(leaked, { organizationId })) === 'invalid' ? 'refused' : 'still-works',
    };
  } catch (error) {
    return { verdict: 'unknown', errorCode: errorCode(error) };
  }
}

export interface LeakProof extends ProbeVerdict {
  keyId: string;
  organizationId: string;
  /** Two-slot entries: the slot the leaked value belonged to. */
  slot?: string;
  /** The leak rotation, when there was one. */
  rotationId?: string;
  /** How the leak rotation ended (rotated, failed, busy, ...). */
  rotation?: KeyResult;
  /** First 12 hex characters of the leaked value's SHA-256. */
  fingerprint: string;
}

export interface ProofInput {
  key: KeyPolicy;
  leaked: Secret;
  slot?: string;
  rotationId?: string;
  rotation?: KeyResult;
}

/**
 * Probes the leaked value and reports it: `leak.proven-dead` (info), `leak.still-alive` (error,
 * plus a critical `KR_LEAK_STILL_ALIVE` alert) or `leak.unproven` (error, plus an error-level
 * `KR_LEAK_UNPROVEN` alert: nobody may assume a leak is closed that keyroll could not check).
 */
export async function proveLeakDead(
  runtime: Pick<Runtime, 'api'>,
  audit: AuditLog,
  alerter: Alerter,
  input: ProofInput,
): Promise<LeakProof> {
  const { key, leaked } = input;
  const probed = await probeLeakedSecret(runtime, leaked, key.organizationId);
  const proof: LeakProof = {
    keyId: key.id,
    organizationId: key.organizationId,
    ...(input.slot === undefined ? {} : { slot: input.slot }),
    ...(input.rotationId === undefined ? {} : { rotationId: input.rotationId }),
    ...(input.rotation === undefined ? {} : { rotation: input.rotation }),
    fingerprint: leaked.fingerprint(),
    ...probed,
  };
  const keyAudit = audit.child({
    keyId: key.id,
    organizationId: key.organizationId,
    ...(input.rotationId === undefined ? {} : { rotationId: input.rotationId }),
  });
  const fields = {
    fingerprint: proof.fingerprint,
    ...(proof.slot === undefined ? {} : { slot: proof.slot }),
    ...(proof.rotation === undefined ? {} : { rotation: proof.rotation }),
  };
  if (probed.verdict === 'refused') {
    keyAudit.emit('leak.proven-dead', { ...fields, status: 401 });
    return proof;
  }
  const rotated =
    proof.rotation === 'rotated'
      ? 'after its leak rotation'
      : `after a leak rotation that ended ${proof.rotation ?? 'without a result'}`;
  const what = `the leaked secret (fingerprint ${proof.fingerprint}) of key ${slotName(proof)} (${key.organizationId})`;
  if (probed.verdict === 'still-works') {
    keyAudit.emit('leak.still-alive', fields);
    await alerter.send(
      {
        severity: 'critical',
        summary: `${what} still opens the API ${rotated}`,
        keyId: key.id,
        organizationId: key.organizationId,
        ...(input.rotationId === undefined ? {} : { rotationId: input.rotationId }),
        step: 'leak-proof',
        errorCode: 'KR_LEAK_STILL_ALIVE',
        nextAction: `rotate it again now (keyroll rotate --key ${proof.slot ?? key.id} --reason leak); if the API still accepts the value after a rotation that succeeded, revoke the key in the dashboard`,
        details: fields,
      },
      key.notify.onFailure,
    );
    return proof;
  }
  keyAudit.emit('leak.unproven', { ...fields, errorCode: probed.errorCode });
  await alerter.send(
    {
      severity: 'error',
      summary: `keyroll could not check whether ${what} is dead ${rotated}: the API gave no answer that says (${probed.errorCode ?? 'unknown error'})`,
      keyId: key.id,
      organizationId: key.organizationId,
      ...(input.rotationId === undefined ? {} : { rotationId: input.rotationId }),
      step: 'leak-proof',
      errorCode: 'KR_LEAK_UNPROVEN',
      nextAction:
        'check by hand that the API answers 401 to the leaked value (docs/runbook.md, "A secret leaked")',
      details: { ...fields, probeErrorCode: probed.errorCode },
    },
    key.notify.onFailure,
  );
  return proof;
}

function slotName(proof: Pick<LeakProof, 'keyId' | 'slot'>): string {
  return proof.slot === undefined ? proof.keyId : `${proof.keyId} (slot ${proof.slot})`;
}
