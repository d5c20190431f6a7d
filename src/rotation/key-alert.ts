// An alert about one key: it names the key and its organization, and goes to the sinks the key's
// policy names for failures (`notify.onFailure`), else to the alerter's defaults. The rotation's
// steps, the drift probe and quarantine reminders all alert through here (invariant 7).
import type { Alert } from '../alerts/public/types.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import type { RotationDeps } from './types.ts';

export async function sendAlert(
  deps: RotationDeps,
  key: KeyPolicy,
  alert: Omit<Alert, 'keyId' | 'organizationId'>,
): Promise<void> {
  const sinks = key.notify.onFailure.length > 0 ? key.notify.onFailure : undefined;
  await deps.alerter.send({ ...alert, keyId: key.id, organizationId: key.organizationId }, sinks);
}
