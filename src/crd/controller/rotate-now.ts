// The rotate-now annotation (issue 31, "Asking for a rotation"): `keyroll.io/rotate-now:
// "<reason>[: text]"` on a RotatedKey asks keyroll's leader to rotate it now, as `cmctl renew` or
// external-secrets' force-sync do. The reasons are `keyroll rotate`'s, with its rule: leak and
// compromise bypass the minimum interval (invariant 5's exception), the others respect it. Who
// asked is the field manager that owns the annotation in metadata.managedFields: a controller
// never sees the user behind a request (the API server's audit log has it).
import {
  isLeakReason,
  type KeyOutcome,
  type RotationReason,
  type RunTrigger,
} from '../../rotation/public/types.ts';
import type { RotateNowStatus } from '../kinds/rotated-key-status.ts';
import type { WatchedObject } from '../watch/resource.ts';

export const ROTATE_NOW_ANNOTATION = 'keyroll.io/rotate-now';

/** The reasons `keyroll rotate --reason` takes. */
export const ROTATE_NOW_REASONS = ['leak', 'compromise', 'plan-change', 'manual'] as const;
export type RotateNowReason = (typeof ROTATE_NOW_REASONS)[number] & RotationReason;

/** What the leader asks the daemon to do for one request. */
export interface RotateNowCall {
  reason: RotateNowReason;
  /** The free text after the reason (a ticket, a note), when there is one. */
  text?: string;
  /** The field manager that set the annotation (kubectl-annotate, argocd-controller, ...). */
  requestedBy?: string;
  /** The RotatedKey, as `namespace/name`. */
  object: string;
}

/**
 * The daemon's side: rotate `keyId` now, as `keyroll rotate` would (the daemon wires it to the
 * launcher's runOne with rotateNowTrigger), and resolve with the key's outcome.
 */
export type RotateNowPort = (keyId: string, call: RotateNowCall, signal: AbortSignal) => Promise<KeyOutcome>;

/** The run trigger of a request: the CLI's, so a leak bypasses minInterval and nothing else does. */
export function rotateNowTrigger(call: RotateNowCall): RunTrigger {
  return {
    reason: call.reason,
    force: isLeakReason(call.reason),
    ignoreSchedule: true,
    actor: `rotate-now by ${call.requestedBy ?? 'an unknown field manager'} on ${call.object}`,
    ...(call.text === undefined ? {} : { ticket: call.text }),
  };
}

/** The request an annotation value makes; undefined when its reason is not one keyroll knows. */
export function parseRotateNow(value: string): { reason: RotateNowReason; text?: string } | undefined {
  const colon = value.indexOf(':');
  const reason = (colon < 0 ? value : value.slice(0, colon)).trim();
  const text = colon < 0 ? '' : value.slice(colon + 1).trim();
  const known = ROTATE_NOW_REASONS.find((candidate) => candidate === reason);
  if (known === undefined) return undefined;
  return text === '' ? { reason: known } : { reason: known, text };
}

export function rotateNowValue(object: WatchedObject | undefined): string | undefined {
  return object?.metadata?.annotations?.[ROTATE_NOW_ANNOTATION];
}

interface ManagedFieldsEntry {
  manager?: string;
  time?: string;
  fieldsV1?: { 'f:metadata'?: { 'f:annotations'?: Record<string, unknown> } };
}

/**
 * The field manager owning the annotation (the latest, when several share it). Server-side apply
 * and every update record who last set a field; that is all a controller can know of who asked.
 */
export function requestedBy(object: WatchedObject): string | undefined {
  const entries = (object.metadata as { managedFields?: ManagedFieldsEntry[] } | undefined)?.managedFields;
  const owners = (entries ?? []).filter(
    (entry) =>
      entry.manager !== undefined &&
      entry.fieldsV1?.['f:metadata']?.['f:annotations']?.[`f:${ROTATE_NOW_ANNOTATION}`] !== undefined,
  );
  owners.sort((a, b) => Date.parse(b.time ?? '') - Date.parse(a.time ?? ''));
  return owners[0]?.manager;
}

/** The stored rotateNow of a status, when it is one. */
export function storedRotateNow(status: unknown): RotateNowStatus | undefined {
  const value = (status as { rotateNow?: unknown } | undefined)?.rotateNow;
  if (typeof value !== 'object' || value === null) return undefined;
  const candidate = value as Partial<RotateNowStatus>;
  return typeof candidate.value === 'string' ? (candidate as RotateNowStatus) : undefined;
}

/** True when this value was already served: asked again with the same value, it is not rotated again. */
export function alreadySettled(object: WatchedObject, value: string): boolean {
  const stored = storedRotateNow(object.status);
  return stored?.value === value && stored.settledAt !== undefined;
}

/**
 * How a request ended, as status.rotateNow.outcome and the Event say it; undefined for a run that
 * did not get to decide (shutdown, lost leadership): the request stays for the next leader.
 */
export function settledOutcome(outcome: KeyOutcome): string | undefined {
  switch (outcome.result) {
    case 'rotated':
      return 'Rotated';
    case 'recovered':
      return 'Recovered';
    case 'failed':
      return 'RotationFailed';
    case 'skipped':
      return 'Skipped';
    case 'busy':
      return 'LockBusy';
    case 'aborted':
      return undefined;
  }
}
